"""The one way this program installs a Helm chart: a real Helm release (hooks run as hooks),
pinned chart version, its own namespace, a bounded wait."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

HELM_TIMEOUT_SECONDS = 900


@dataclass
class Chart:
    """A pinned chart: release name, chart, version, repository."""

    release: str
    chart: str
    version: str
    repo: str


@dataclass
class HelmReleaseArgs:
    chart: Chart
    namespace: str
    values: dict[str, Any]
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)


def helm_release(name: str, args: HelmReleaseArgs, parent: pulumi.Resource) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        name,
        name=args.chart.release,
        chart=args.chart.chart,
        version=args.chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=args.chart.repo),
        namespace=args.namespace,
        create_namespace=True,
        values=args.values,
        timeout=HELM_TIMEOUT_SECONDS,
        opts=pulumi.ResourceOptions(parent=parent, provider=args.provider, depends_on=args.depends_on),
    )
