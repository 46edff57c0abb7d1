"""GpuQuota: the tenant's one GPU budget at run time, the twin of the preview-time policy.

Kubernetes quotas are per namespace, so a budget copied into every namespace would multiply with
the number of namespaces. Instead the budget is split (rules.budget_shares): each workload
namespace gets what its declared workloads use, `default` the rest; the shares add up to the
budget. Each share is a ResourceQuota with both spellings of the GPU resources:
- `limits.nvidia.com/*`, which HAMi reads and enforces with its own accounting (a bare
  `nvidia.com/gpu` counts as a whole card there);
- `requests.nvidia.com/*`, which the API server's quota admission enforces on what a pod
  declares (extended resources are quota'd by their requests).
A ValidatingAdmissionPolicy bound to every namespace keeps GPU pods inside the budget: only in
the namespaces with a share (listed by name, and labelled), only scheduled by HAMi (whose
webhook fails open), never on a named node, privileged, or asking for an uncounted resource.
A workload namespace is retained when its last workload goes (the team may keep its own objects
there, as docs/quotas.md invites): its share and quota go, and with them its place in the policy, so
no GPU pod is admitted there; the namespace, its label and what is in it stay. Declaring it again
adopts it (server-side apply).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.domain.hami_annotations import (
    HAMI_WEBHOOK_LABEL,
    RES_GPU,
    RES_GPUCORES,
    RES_GPUMEM,
    RES_GPUMEM_PERCENTAGE,
    RES_PRIORITY,
    SCHEDULER_NAME,
)
from components.domain.names import GPU_BUDGET_LABEL
from components.domain.requests import Quota, budget_shares
from components.platform.component_options import waits_for

QUOTA_NAME = "gpu-quota"
SHARED_NAMESPACE = "default"
POLICY_NAME = "gpu-tenancy-gpu-budget"
# The nvidia.com/ resources HAMi knows (the budget counts the first three; HAMi turns a memory
# percentage into MB of the card and reads a priority); any other nvidia.com/ name is counted by nobody.
COUNTED = (RES_GPU, RES_GPUMEM, RES_GPUCORES, RES_GPUMEM_PERCENTAGE, RES_PRIORITY)
_GROUPS = ("containers", "initContainers", "ephemeralContainers")


def _keys(c: str) -> str:
    """CEL: the resource names container `c` asks for (limits and requests)."""
    return (
        f"(has({c}.resources) && has({c}.resources.limits) ? {c}.resources.limits.map(k, k) : []) + "
        f"(has({c}.resources) && has({c}.resources.requests) ? {c}.resources.requests.map(k, k) : [])"
    )


def _containers() -> str:
    return " + ".join(f"(has(object.spec.{g}) ? object.spec.{g} : [])" for g in _GROUPS)


def budget_policy_spec(tenant: str, namespaces: list[str]) -> dict[str, Any]:
    """The admission rules that keep every GPU pod inside the budget and under HAMi's accounting.

    A validating policy runs after the mutating webhooks, so it sees what HAMi's webhook did (or
    did not do: it skips some pods, and fails open when unreachable). Each rule has its own message.
    """
    listed = "[" + ", ".join(f"'{n}'" for n in namespaces) + "]"
    key, value = GPU_BUDGET_LABEL
    counted = "[" + ", ".join(f"'{r}'" for r in COUNTED) + "]"
    gpu = "variables.gpu"

    def rule(name: str, expression: str, message: str, reason: str = "Forbidden") -> dict[str, str]:
        return {"expression": expression, "message": f"{name} (tenant {tenant}): {message}", "reason": reason}

    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods", "pods/ephemeralcontainers"],
                }
            ]
        },
        "variables": [
            {"name": "asked", "expression": f"({_containers()}).map(c, {_keys('c')}).flatten()"},
            {"name": "gpu", "expression": "variables.asked.exists(k, k.startsWith('nvidia.com/'))"},
            {"name": "create", "expression": "request.operation == 'CREATE' && !has(request.subResource)"},
            {
                "name": "ephemeral",
                "expression": "has(request.subResource) && request.subResource == 'ephemeralcontainers'",
            },
            {
                "name": "budgeted",
                "expression": f"has(namespaceObject.metadata.labels) && '{key}' in namespaceObject.metadata.labels "
                f"&& namespaceObject.metadata.labels['{key}'] == '{value}' "
                f"&& namespaceObject.metadata.name in {listed}",
            },
        ],
        "validations": [
            rule(
                "gpu-budget-namespace",
                f"!variables.create || !{gpu} || variables.budgeted",
                "GPU pods run only in the namespaces that hold a share of the tenant's GPU budget "
                f"({', '.join(namespaces)}); a namespace gets a share from a workload in the stack config, "
                "not from a label",
            ),
            rule(
                "gpu-scheduler-hami",
                f"!variables.create || !{gpu} || object.spec.schedulerName == '{SCHEDULER_NAME}'",
                f"a GPU pod is scheduled by HAMi (schedulerName {SCHEDULER_NAME}), which does the card accounting; "
                "this one kept another scheduler: HAMi's webhook skipped it (its own schedulerName, the label "
                "hami.io/webhook: ignore, a privileged container) or could not be reached",
            ),
            rule(
                "gpu-no-node-name",
                f"!variables.create || !{gpu} || !has(object.spec.nodeName) || object.spec.nodeName == ''",
                "a GPU pod may not name its node (spec.nodeName skips the scheduler, and so HAMi's accounting)",
            ),
            rule(
                "gpu-webhook-not-skipped",
                f"!variables.create || !{gpu} || !has(object.metadata.labels) || "
                f"!('{HAMI_WEBHOOK_LABEL[0]}' in object.metadata.labels) || "
                f"object.metadata.labels['{HAMI_WEBHOOK_LABEL[0]}'] != '{HAMI_WEBHOOK_LABEL[1]}'",
                f"a GPU pod may not carry {HAMI_WEBHOOK_LABEL[0]}: {HAMI_WEBHOOK_LABEL[1]} (it skips HAMi's webhook)",
            ),
            rule(
                "gpu-not-privileged",
                f"!variables.create || !{gpu} || !({_containers()}).exists(c, has(c.securityContext) && "
                "has(c.securityContext.privileged) && c.securityContext.privileged)",
                "a GPU pod may not run a privileged container (it would see every card of the node, not its slice)",
            ),
            rule(
                "gpu-no-ephemeral-request",
                f"!variables.ephemeral || !(has(object.spec.ephemeralContainers) && "
                f"object.spec.ephemeralContainers.exists(c, ({_keys('c')}).exists(k, k.startsWith('nvidia.com/'))))",
                "an ephemeral container may not ask for GPUs",
            ),
            rule(
                "gpu-resource-counted",
                f"!variables.create || variables.asked.all(k, !k.startsWith('nvidia.com/') || k in {counted})",
                f"only HAMi's resources ({', '.join(COUNTED)}) may be asked for; "
                "no budget counts another nvidia.com/ name",
            ),
        ],
    }


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


class GpuQuota(pulumi.ComponentResource):
    """The GPU namespaces (labelled), a ResourceQuota share in each, and the admission policy.
    Options: `provider` the tenant's; `depends_on` what all of it comes after."""

    namespaces: dict[str, pulumi.Resource]

    def __init__(self, name: str, args: GpuQuotaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuQuota", name, None, opts)
        on_tenant = pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts))
        label = {GPU_BUDGET_LABEL[0]: GPU_BUDGET_LABEL[1]}
        self.shares = budget_shares(args.budget, args.declared, SHARED_NAMESPACE)
        self.namespaces = {}
        for ns in self.shares:
            meta = {"name": ns, "labels": label}
            if ns == SHARED_NAMESPACE:  # exists in every cluster: labelled, not owned
                self.namespaces[ns] = k8s.core.v1.NamespacePatch(f"{name}-ns-{ns}", metadata=meta, opts=on_tenant)
            else:  # made by the stack, never deleted by it (see above)
                self.namespaces[ns] = k8s.core.v1.Namespace(
                    f"{name}-ns-{ns}",
                    metadata=meta,
                    opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(retain_on_delete=True)),
                )
        self.quotas = [
            k8s.core.v1.ResourceQuota(
                f"{name}-{ns}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=QUOTA_NAME, namespace=ns),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(hard=quota_hard(share)),
                opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[self.namespaces[ns]])),
            )
            for ns, share in self.shares.items()
        ]
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata={"name": POLICY_NAME},
            spec=budget_policy_spec(args.tenant, list(self.shares)),
            opts=on_tenant,
        )
        self.policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-policy-binding",
            metadata={"name": POLICY_NAME},
            spec={
                "policyName": POLICY_NAME,
                "validationActions": ["Deny"],
            },
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[policy])),
        )
        self.register_outputs({"shares": {ns: q.__dict__ for ns, q in self.shares.items()}})
