"""Tenant-level test program: the project's GpuQuota on an adopted cluster (secret config
`kubeconfig`): budget from config `budget`, declared use per namespace from `declared`."""

import pulumi
import pulumi_kubernetes as k8s

from components.domain.requests import Quota
from components.tenant.gpu_quota import GpuQuota, GpuQuotaArgs

config = pulumi.Config()
provider = k8s.Provider("adopted", kubeconfig=config.require_secret("kubeconfig"))
quota = GpuQuota(
    "quota",
    GpuQuotaArgs(
        budget=Quota(**config.require_object("budget")),
        declared={ns: Quota(**q) for ns, q in config.require_object("declared").items()},
        tenant="team-a",
    ),
    opts=pulumi.ResourceOptions(provider=provider),
)
pulumi.export("shares", {ns: [q.gpus, q.gpumem_mb, q.gpucores] for ns, q in quota.shares.items()})
