"""The one way this program installs a Helm chart: a real Helm release (hooks run as hooks),
pinned chart version, its own namespace, a bounded wait; the chart from its repository, a local
directory or an OCI registry (components.config.chart_sources)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import chart_sources
from components.config.chart_sources import ChartSource

HELM_TIMEOUT_SECONDS = 900


@dataclass
class Chart:
    """A pinned chart: release name, chart, version, repository (its default source)."""

    release: str
    chart: str
    version: str
    repo: str

    @property
    def source(self) -> ChartSource:
        return chart_sources.repository(self.chart, self.version, self.repo)


@dataclass
class HelmReleaseArgs:
    chart: Chart
    namespace: str
    values: dict[str, Any]
    # Where the chart comes from; None: the chart's repository.
    source: ChartSource | None = None


def chart_inputs(chart: Chart, source: ChartSource | None) -> dict[str, Any]:
    """What helm.v3.Release is given to find the pinned chart at its source.

    - repository: the chart's name, its version and `repositoryOpts.repo`;
    - directory: the path and the pinned version (Helm reads a directory as it is and ignores
      the version; the provider's check records Chart.yaml's, which the config check held to the pin);
    - oci: `oci://host/path/<chart>` without a tag, and the version, which Helm turns into the
      tag (`+` as `_`). No repositoryOpts: with a repository URL Helm would skip the directory,
      and for an OCI reference it ignores them.
    """
    source = source or chart.source
    if source.version != chart.version:
        raise ValueError(f"{chart.chart}: a source of version {source.version} for the pinned {chart.version}")
    if source.kind == chart_sources.REPO:
        return {
            "chart": source.chart,
            "version": source.version,
            "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=source.repo),
        }
    if source.kind in (chart_sources.DIRECTORY, chart_sources.OCI):
        return {"chart": source.chart, "version": source.version}
    raise ValueError(f"{chart.chart}: unknown chart source kind {source.kind!r}")


def helm_release(name: str, args: HelmReleaseArgs, opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """The chart's release; `opts` as for any resource (its provider, as a rule, its parent's)."""
    return k8s.helm.v3.Release(
        name,
        name=args.chart.release,
        **chart_inputs(args.chart, args.source),
        namespace=args.namespace,
        create_namespace=True,
        values=args.values,
        timeout=HELM_TIMEOUT_SECONDS,
        opts=opts,
    )
