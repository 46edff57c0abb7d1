"""GpuQuota: the tenant's one GPU budget at run time, the twin of the preview-time policy.

Kubernetes quotas are per namespace, so a budget copied into every namespace would multiply with
the number of namespaces. Instead the budget is split (rules.budget_shares): each workload
namespace gets what its declared workloads use, `default` the rest; the shares add up to the
budget. Each share is a ResourceQuota with both spellings of the GPU resources:
- `limits.nvidia.com/*`, which HAMi reads and enforces with its own accounting (a bare
  `nvidia.com/gpu` counts as a whole card there);
- `requests.nvidia.com/*`, which the API server's quota admission enforces on what a pod
  declares (extended resources are quota'd by their requests).
Only namespaces with a share may run GPU pods: a ValidatingAdmissionPolicy refuses GPU pods in
any namespace without the budget label, so a new namespace cannot open a second budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.config.names import GPU_BUDGET_LABEL
from components.gpu.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM
from components.gpu.rules import Quota, budget_shares

QUOTA_NAME = "gpu-quota"
SHARED_NAMESPACE = "default"
POLICY_NAME = "gpu-tenancy-gpu-budget"
# CEL: does any container or init container of the pod ask for an nvidia.com/ resource?
_ASKS = (
    "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('nvidia.com/'))) || "
    "(has(c.resources.requests) && c.resources.requests.exists(k, k.startsWith('nvidia.com/'))))"
)
NO_GPU_EXPRESSION = (
    f"!object.spec.containers.exists(c, {_ASKS}) && "
    f"!(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {_ASKS}))"
)


def quota_hard(q: Quota) -> dict[str, str]:
    out = {}
    for prefix in ("limits", "requests"):
        out |= {
            f"{prefix}.{RES_GPU}": str(q.gpus),
            f"{prefix}.{RES_GPUMEM}": str(q.gpumem_mb),
            f"{prefix}.{RES_GPUCORES}": str(q.gpucores),
        }
    return out


@dataclass
class GpuQuotaArgs:
    budget: Quota
    # What the stack's own workloads use, per namespace (namespaces other than default are made).
    declared: dict[str, Quota]
    tenant: str
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class GpuQuota(pulumi.ComponentResource):
    """The GPU namespaces (labelled), a ResourceQuota share in each, and the admission policy."""

    namespaces: dict[str, pulumi.Resource]

    def __init__(self, name: str, args: GpuQuotaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuQuota", name, None, opts)
        on_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        label = {GPU_BUDGET_LABEL[0]: GPU_BUDGET_LABEL[1]}
        self.shares = budget_shares(args.budget, args.declared, SHARED_NAMESPACE)
        self.namespaces = {}
        for ns in self.shares:
            meta = {"name": ns, "labels": label}
            if ns == SHARED_NAMESPACE:  # exists in every cluster: labelled, not owned
                self.namespaces[ns] = k8s.core.v1.NamespacePatch(f"{name}-ns-{ns}", metadata=meta, opts=on_tenant)
            else:
                self.namespaces[ns] = k8s.core.v1.Namespace(f"{name}-ns-{ns}", metadata=meta, opts=on_tenant)
        self.quotas = [
            k8s.core.v1.ResourceQuota(
                f"{name}-{ns}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=QUOTA_NAME, namespace=ns),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(hard=quota_hard(share)),
                opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[self.namespaces[ns]])),
            )
            for ns, share in self.shares.items()
        ]
        message = (
            f"tenant {args.tenant}: GPU pods run only in the namespaces that hold a share of the tenant's GPU "
            f"budget ({', '.join(self.shares)}); give this namespace a share in the stack config (a workload there)"
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata={"name": POLICY_NAME},
            spec={
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                    ]
                },
                "validations": [{"expression": NO_GPU_EXPRESSION, "message": message}],
            },
            opts=on_tenant,
        )
        self.policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-policy-binding",
            metadata={"name": POLICY_NAME},
            spec={
                "policyName": POLICY_NAME,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {
                        "matchExpressions": [{"key": GPU_BUDGET_LABEL[0], "operator": "DoesNotExist"}]
                    }
                },
            },
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[policy])),
        )
        self.register_outputs({"shares": {ns: q.__dict__ for ns, q in self.shares.items()}})
