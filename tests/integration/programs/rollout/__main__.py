"""Tenant-level test program: one GPU workload (config `workload`) with the budget share the
tenant component gives it (GpuQuota, declared use counted at the rollout's peak), on an adopted
cluster (secret config `kubeconfig`). Config `webhookStandIn: true` sets the pods'
schedulerName as HAMi's webhook does, for clusters that run no HAMi."""

import pulumi

from components.domain import hami_annotations as ha
from components.domain.requests import total_usage
from components.tenant.gpu_quota import GpuQuota, GpuQuotaArgs
from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs
from tests.support.tenant_program import adopted_tenant

config = pulumi.Config()
lab = adopted_tenant({"gpus": 4, "gpumemMb": 81920, "gpucoresPercent": 100})
t, w, provider, kubeconfig = lab.tenant, lab.workload, lab.provider, lab.kubeconfig
quota = GpuQuota(
    "quota",
    GpuQuotaArgs(
        budget=t.quota.quota,
        declared={w.namespace: total_usage([w.demand(t.fleet.models)])},
        tenant="team-a",
    ),
    opts=pulumi.ResourceOptions(provider=provider),
)


def as_hami_webhook_leaves_it(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    if args.type_ != "kubernetes:apps/v1:Deployment":
        return None
    props = dict(args.props)
    template = props["spec"]["template"]
    pod = {**template["spec"], "schedulerName": ha.SCHEDULER_NAME}
    props["spec"] = {**props["spec"], "template": {**template, "spec": pod}}
    return pulumi.ResourceTransformResult(props, args.opts)


stand_in = config.get_bool("webhookStandIn") or False
workload = GpuWorkload(
    "wl",
    GpuWorkloadArgs(tenant="team-a", workload=w, kubeconfig=kubeconfig),
    opts=pulumi.ResourceOptions(
        provider=provider, depends_on=[quota], transforms=[as_hami_webhook_leaves_it] if stand_in else None
    ),
)
pulumi.export("pods", workload.release.pods)
pulumi.export("shares", {ns: [q.gpus, q.gpumem_mb, q.gpucores] for ns, q in quota.shares.items()})
