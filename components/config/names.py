"""Names and labels this project gives the objects it creates (read back by the policy pack and
the release controller): one place, so every reader agrees."""

TENANT_LABEL = "gpu-tenancy/tenant"
WORKLOAD_LABEL = "gpu-tenancy/workload"
# Nodes whose GPUs are fake (the inventory writes their cards): only there does the release
# controller finish HAMi's allocation; on real GPU nodes the device plugin does it.
MOCK_GPU_NODE_LABEL = ("gpu-tenancy/mock-gpu", "true")


def releaser_name(lab: str, tenant: str) -> str:
    """Docker name of a tenant's release controller container."""
    return f"{lab}-{tenant}-releaser"
