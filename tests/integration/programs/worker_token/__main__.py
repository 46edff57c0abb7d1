"""Tenant-level test program: a docker worker's BootstrapToken as WorkerNode makes it (its own
Node expected, `worker_joins`), on the tenant given by the secret config `kubeconfig`, with its
life in seconds (`ttlSeconds`) so the test can watch it lapse. The join itself needs Docker; the
test plays the worker's kubelet and its NodeMembership."""

import pulumi

from components.lifecycle.bootstrap_token import token_id, worker_joins
from components.providers.bootstrap_token import BootstrapToken

config = pulumi.Config()
node = config.require("node")
token = BootstrapToken(
    "worker-token",
    kubeconfig=config.require_secret("kubeconfig"),
    token_id=token_id(f"{node}/container-1"),
    ttl_seconds=config.require_int("ttlSeconds"),
    description=f"gpu-tenancy: join of {node}",
    joins=worker_joins(node),
)
pulumi.export("tokenId", token.token_id)
pulumi.export("token", token.token)
pulumi.export("expiration", token.expiration)
