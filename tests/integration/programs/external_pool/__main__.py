"""Tenant-level test program: the project's ExternalPool against a real API server.

The tenant's admin kubeconfig comes in as the secret config key `kubeconfig`; the token's
lifetime is given in seconds so the test can watch it expire.
"""

import pulumi

from components.ops.bootstrap import kubeconfig_ca_hash
from components.tenant.external_pool import ExternalPool, ExternalPoolArgs

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
pool = ExternalPool(
    "team-a-gpus",
    ExternalPoolArgs(
        tenant="team-a",
        pool="gpus",
        endpoint=config.require("endpoint"),
        admin_kubeconfig=kubeconfig,
        ca_cert_hash=kubeconfig.apply(kubeconfig_ca_hash),
        token_ttl_seconds=config.require_int("ttlSeconds"),
    ),
)
pulumi.export("join", pool.join)
pulumi.export("tokenId", pool.token.id)
