"""ExternalPool: the team's own GPU machines, joined to the tenant with kubeadm.

The stack makes a bootstrap token that expires (`joinTokenHours`) and outputs, as a secret, the
join command with the tenant CA pinned, and the same as a JoinConfiguration that labels the
node for HAMi's NVIDIA device plugin (`gpu=on`) and its pool. No fake inventory and no lock
releaser: the real plugin registers the cards and completes HAMi's allocations. To join more
machines after the token expired: `pulumi up --replace` the pool's token (README).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.config.model import POOL_EXTERNAL
from components.config.names import pool_labels
from components.gpu.hami_annotations import GPU_NODE_LABEL
from components.ops.bootstrap import machine_join, token_id
from components.providers.bootstrap_token import BootstrapToken


def external_labels(tenant: str, pool: str) -> dict[str, str]:
    """What the join gives each machine: HAMi's NVIDIA plugin runs on `gpu=on` nodes."""
    return {GPU_NODE_LABEL[0]: GPU_NODE_LABEL[1], **pool_labels(tenant, pool, POOL_EXTERNAL)}


@dataclass
class ExternalPoolArgs:
    tenant: str
    pool: str
    # host:port of the tenant API server, as the team's machines reach it.
    endpoint: str
    admin_kubeconfig: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    token_ttl_seconds: int
    # The tenant's node-bootstrap RBAC: the token is only useful after it.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class ExternalPool(pulumi.ComponentResource):
    token: BootstrapToken
    join: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: ExternalPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:ExternalPool", name, None, opts)
        self.token = BootstrapToken(
            f"{name}-token",
            kubeconfig=args.admin_kubeconfig,
            token_id=token_id(f"{args.tenant}/{args.pool}"),
            ttl_seconds=args.token_ttl_seconds,
            description=f"gpu-tenancy: joins of pool {args.pool} of {args.tenant}",
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        labels = external_labels(args.tenant, args.pool)
        self.join = pulumi.Output.secret(
            pulumi.Output.all(self.token.token, args.ca_cert_hash, self.token.expiration).apply(
                lambda a: {**machine_join(args.endpoint, a[0], a[1], labels), "expires": a[2]}
            )
        )
        self.register_outputs({"join": self.join})
