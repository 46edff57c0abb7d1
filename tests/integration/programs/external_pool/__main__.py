"""Tenant-level test program: the project's ExternalPool against a real API server.

The tenant's admin kubeconfig comes in as the secret config key `kubeconfig`; the token's
lifetime is given in seconds so the test can watch it expire, and `machines` is the pool's
`nodes`. The output has the dev stack's shape (`<tenant>.pools.<pool>.join`), so the documented
commands run on it unchanged.
"""

import pulumi

from components.lifecycle.bootstrap_token import kubeconfig_ca_hash
from components.tenant.external_pool import ExternalPool, ExternalPoolArgs

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
machines = config.require_int("machines")
pool = ExternalPool(
    "team-a-gpus",
    ExternalPoolArgs(
        tenant="team-a",
        pool="gpus",
        endpoint=config.require("endpoint"),
        admin_kubeconfig=kubeconfig,
        ca_cert_hash=kubeconfig.apply(kubeconfig_ca_hash),
        token_ttl_seconds=config.require_int("ttlSeconds"),
        machines=machines,
    ),
)
pulumi.export("team-a", {"pools": {"gpus": {"mode": "external", "machines": machines, "join": pool.join}}})
pulumi.export("tokenId", pool.token.id)
