"""PlatformLink: the shared platform as a team stack sees it, through a StackReference.

A team stack creates no cluster and no Kamaji; it reads the platform stack's `platform` output
(the management API server's address and CA, Docker network, lab name, team registry: no
credential) and checks, before anything reaches the management cluster, that its tenants are
the ones the platform reserved ports for. It reaches the management cluster with its team's own
token (secret config `managementToken`, a TeamAccess ServiceAccount's), never the admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import team_slot_problems
from components.config.model import MANAGEMENT_TOKEN_KEY, StackConfig
from components.domain.names import TEAM_ACCOUNT
from components.kube.client import cluster_ca, cluster_server, token_kubeconfig
from components.kube.team_token import token_seconds_left

RENEW_WARNING_SECONDS = 7 * 24 * 3600


def platform_outputs(
    kubeconfig: pulumi.Input[str], network: pulumi.Input[str], cfg: StackConfig, datastore: pulumi.Input[str]
) -> dict[str, Any]:
    """What a platform stack exports for its team stacks (one place for the keys): where the
    management API server is and its CA, never a credential."""
    kc = pulumi.Output.from_input(kubeconfig)
    return {
        "managementServer": pulumi.Output.unsecret(kc.apply(cluster_server)),
        "managementCa": pulumi.Output.unsecret(kc.apply(cluster_ca)),
        "network": network,
        "lab": cfg.cluster.name,
        "address": cfg.cluster.management_ip,
        "datastore": datastore,
        # the lab's one registry mirror: a team's workers must pull through it too ("" for none:
        # an output's null is dropped, and a missing key means a platform from before)
        "mirror": cfg.mirror.endpoint if cfg.mirror else "",
        "teams": [
            {
                "name": t.name,
                "apiPort": t.api_port,
                "konnectivityPort": t.konnectivity_port,
                # the etcd keys the platform's policy holds the team to (a team stack uses these)
                "schema": t.datastore_schema(cfg.project),
            }
            for t in cfg.teams
        ],
    }


def _checked(platform: dict[str, Any], cfg: StackConfig) -> dict[str, Any]:
    problems = team_slot_problems(platform.get("teams") or [], cfg.cluster.name, platform.get("lab", ""), cfg.tenants)
    if platform.get("address") != cfg.cluster.management_ip:
        problems.append(
            f"cluster.managementIp is {cfg.cluster.management_ip!r} but the platform's is {platform.get('address')!r}"
        )
    mine = cfg.mirror.endpoint if cfg.mirror else None
    theirs = platform.get("mirror") or None
    if "mirror" in platform and theirs != mine:
        problems.append(
            f"mirror.endpoint is {mine!r} but the platform's lab pulls through {theirs!r}: the lab has one mirror"
            if theirs
            else f"mirror.endpoint is {mine!r} but the platform's lab has no mirror: unset it, or give the platform "
            "stack the same one"
        )
    if problems:
        raise pulumi.RunError(
            f"this team stack does not match platform stack {cfg.platform_stack}: " + "; ".join(problems)
        )
    return platform


def checked_token(token: str) -> str:
    """The team's token, or a plain error when it has expired (its owner renews it)."""
    left = token_seconds_left(token)
    if left is not None and left <= 0:
        raise pulumi.RunError(
            f"{MANAGEMENT_TOKEN_KEY} expired {-left // 3600} h ago: ask the platform owner to renew it "
            "(scripts/grant-team.sh <team>)"
        )
    if left is not None and left < RENEW_WARNING_SECONDS:
        pulumi.log.warn(f"{MANAGEMENT_TOKEN_KEY} expires in {left // 3600} h: renew it with scripts/grant-team.sh")
    return token


@dataclass
class PlatformLinkArgs:
    config: StackConfig
    # The team's management-cluster token (secret config managementToken).
    token: pulumi.Input[str]


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
        self._platform = platform
        token = args.token
        kubeconfig = pulumi.Output.all(platform, token).apply(
            lambda a: token_kubeconfig(
                a[0]["managementServer"], a[0]["managementCa"], checked_token(a[1]), TEAM_ACCOUNT
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=pulumi.Output.secret(kubeconfig), opts=pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"network": self.network})

    def schema(self, tenant: str) -> pulumi.Output[str]:
        """The etcd keys the platform named for a tenant of this stack (checked present)."""
        return self._platform.apply(lambda p: next(s["schema"] for s in p["teams"] if s["name"] == tenant))
