"""Tenant-level test program: the project's GpuWorkload (a Pod and its ReleaseWait) on an adopted
cluster given by the secret config `kubeconfig`; the workload comes from config `workload`."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
provider = k8s.Provider("adopted", kubeconfig=kubeconfig)
tenant = {
    "name": "team-a",
    "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
    "quota": {"gpus": 10, "gpumemMb": 81920, "gpucoresPercent": 100},
    "workloads": [config.require_object("workload")],
}
cfg = load_stack_config(pulumi.get_project(), {"tenants": [tenant]})
(w,) = cfg.tenants[0].workloads
workload = GpuWorkload("wl", GpuWorkloadArgs(tenant="team-a", workload=w, provider=provider, kubeconfig=kubeconfig))
pulumi.export("pods", workload.release.pods)
