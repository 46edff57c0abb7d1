"""GpuQuota: the tenant's GPU quota as Kubernetes ResourceQuotas, the runtime twin of the
preview-time policy check. HAMi's webhook and scheduler honour `limits.nvidia.com/*` items."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.gpu.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM
from components.gpu.rules import Quota

QUOTA_NAME = "gpu-quota"


def quota_hard(q: Quota) -> dict[str, str]:
    return {
        f"limits.{RES_GPU}": str(q.gpus),
        f"limits.{RES_GPUMEM}": str(q.gpumem_mb),
        f"limits.{RES_GPUCORES}": str(q.gpucores),
    }


@dataclass
class GpuQuotaArgs:
    quota: Quota
    namespaces: list[str]
    provider: k8s.Provider
    # The namespaces themselves, when the stack creates them.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class GpuQuota(pulumi.ComponentResource):
    """One ResourceQuota per namespace the tenant's GPU workloads use.

    Kubernetes quotas are per namespace: each namespace gets the tenant's whole quota, while
    the preview policy sums the tenant's workloads across namespaces.
    """

    def __init__(self, name: str, args: GpuQuotaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuQuota", name, None, opts)
        self.quotas = [
            k8s.core.v1.ResourceQuota(
                f"{name}-{ns}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=QUOTA_NAME, namespace=ns),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(hard=quota_hard(args.quota)),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on),
            )
            for ns in args.namespaces
        ]
        self.register_outputs({})
