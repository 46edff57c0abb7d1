"""ExternalPool: the team's own GPU machines, joined to the tenant with kubeadm.

The stack makes a short-lived bootstrap token (`joinTokenHours`) and outputs, as a secret, a
JoinConfiguration with the tenant CA pinned that labels the node for HAMi's NVIDIA device plugin
(`gpu=on`) and its pool. Each `up` judges the token against the pool's Nodes: renewed while
machines are still to join, revoked once all `nodes` have (BootstrapToken). No fake inventory and
no release controller: the real plugin registers the cards and completes HAMi's allocations.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config.model import POOL_EXTERNAL
from components.domain.hami_annotations import GPU_NODE_LABEL
from components.domain.names import pool_labels
from components.lifecycle.bootstrap_token import label_selector, machine_join, token_id
from components.platform.component_options import waits_for
from components.providers.bootstrap_token import BootstrapToken


def external_labels(tenant: str, pool: str) -> dict[str, str]:
    """What the join gives each machine: HAMi's NVIDIA plugin runs on `gpu=on` nodes."""
    return {GPU_NODE_LABEL[0]: GPU_NODE_LABEL[1], **pool_labels(tenant, pool, POOL_EXTERNAL)}


def join_output(
    endpoint: str, token: str, ca_hash: str, expires: str, revoked: bool, labels: dict[str, str], machines: int
) -> dict[str, str]:
    """The pool's join as the team reads it: the configuration while the token is open, and a
    status that says what to do once it is not."""
    if revoked:
        return {
            "status": f"closed: all {machines} machines joined and the token was revoked; "
            "raise the pool's nodes and run `pulumi up` for a new one",
            "labels": label_selector(labels),
        }
    return {
        **machine_join(endpoint, token, ca_hash, labels),
        "expires": expires,
        "status": f"open until {expires} for {machines} machines; the next `pulumi up` renews it "
        "while machines are still to join and revokes it once all have",
    }


@dataclass
class ExternalPoolArgs:
    tenant: str
    pool: str
    # host:port of the tenant API server, as the team's machines reach it.
    endpoint: str
    admin_kubeconfig: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    token_ttl_seconds: int
    # How many machines are to join: the token is revoked once this many Nodes carry the labels.
    machines: int


class ExternalPool(pulumi.ComponentResource):
    """A join for the team's own machines (option `depends_on`: the tenant's node-bootstrap RBAC,
    without which the token is of no use)."""

    token: BootstrapToken
    join: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: ExternalPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:ExternalPool", name, None, opts)
        labels = external_labels(args.tenant, args.pool)
        self.token = BootstrapToken(
            f"{name}-token",
            kubeconfig=args.admin_kubeconfig,
            token_id=token_id(f"{args.tenant}/{args.pool}"),
            ttl_seconds=args.token_ttl_seconds,
            description=f"gpu-tenancy: joins of pool {args.pool} of {args.tenant}",
            joins={"labels": labels, "expected": args.machines},
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
        )
        self.join = pulumi.Output.secret(
            pulumi.Output.all(self.token.token, args.ca_cert_hash, self.token.expiration, self.token.revoked).apply(
                lambda a: join_output(args.endpoint, a[0], a[1], a[2], bool(a[3]), labels, args.machines)
            )
        )
        self.register_outputs({"join": self.join})
