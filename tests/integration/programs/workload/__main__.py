"""Tenant-level test program: the project's GpuWorkload (a Pod and its ReleaseWait) on an adopted
cluster given by the secret config `kubeconfig`; the workload comes from config `workload`."""

import pulumi

from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs
from tests.support.tenant_program import adopted_tenant

lab = adopted_tenant({"gpus": 10, "gpumemMb": 81920, "gpucoresPercent": 100})
workload = GpuWorkload(
    "wl",
    GpuWorkloadArgs(tenant="team-a", workload=lab.workload, kubeconfig=lab.kubeconfig),
    opts=pulumi.ResourceOptions(provider=lab.provider),
)
pulumi.export("pods", workload.release.pods)
