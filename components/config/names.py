"""Labels this project puts on the objects it creates in tenants (read back by the policy pack)."""

TENANT_LABEL = "gpu-tenancy/tenant"
WORKLOAD_LABEL = "gpu-tenancy/workload"
