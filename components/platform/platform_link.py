"""PlatformLink: the shared platform as a team stack sees it, through a StackReference.

A team stack creates no cluster and no Kamaji; it reads the platform stack's `platform` output
(management kubeconfig, Docker network, lab name, team registry) and checks, before anything
reaches the management cluster, that its tenants are the ones the platform reserved ports for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import StackConfig, team_slot_problems


def platform_outputs(
    kubeconfig: pulumi.Input[str], network: pulumi.Input[str], cfg: StackConfig, datastore: str
) -> dict[str, Any]:
    """What a platform stack exports for its team stacks (one place for the keys)."""
    return {
        "managementKubeconfig": pulumi.Output.secret(kubeconfig),
        "network": network,
        "lab": cfg.cluster.name,
        "address": cfg.cluster.management_ip,
        "datastore": datastore,
        "teams": [{"name": t.name, "apiPort": t.api_port, "konnectivityPort": t.konnectivity_port} for t in cfg.teams],
    }


def _checked(platform: dict[str, Any], cfg: StackConfig) -> dict[str, Any]:
    problems = team_slot_problems(platform.get("teams") or [], cfg.cluster.name, platform.get("lab", ""), cfg.tenants)
    if platform.get("address") != cfg.cluster.management_ip:
        problems.append(
            f"cluster.managementIp is {cfg.cluster.management_ip!r} but the platform's is {platform.get('address')!r}"
        )
    if problems:
        raise pulumi.RunError(
            f"this team stack does not match platform stack {cfg.platform_stack}: " + "; ".join(problems)
        )
    return platform


@dataclass
class PlatformLinkArgs:
    config: StackConfig


class PlatformLink(pulumi.ComponentResource):
    """StackReference to the platform + a management Provider, gated on the team check."""

    provider: k8s.Provider
    network: pulumi.Output[str]
    datastore: pulumi.Output[str]

    def __init__(self, name: str, args: PlatformLinkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:PlatformLink", name, None, opts)
        cfg = args.config
        if cfg.platform_stack is None:
            raise ValueError("a PlatformLink needs the platform stack's name")
        ref = pulumi.StackReference(cfg.platform_stack, opts=pulumi.ResourceOptions(parent=self))
        platform = ref.require_output("platform").apply(lambda p: _checked(p, cfg))
        self.network = platform.apply(lambda p: p["network"])
        self.datastore = platform.apply(lambda p: p["datastore"])
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(platform.apply(lambda p: p["managementKubeconfig"])),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"network": self.network})
