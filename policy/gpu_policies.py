"""The gpu-quotas pack's policies, kept apart from __main__.py (whose PolicyPack blocks forever).

Every verdict comes from the rulebook (components.domain.rules), the code the program's config
validation runs, on the tenants gpu_tenants reads (the same model as the stack config). So
preview and config validation cannot disagree.

The pack fails closed: a GPU object it cannot check against a configured quota is a mandatory
violation that says how to fix it. What an object asks for is read by gpu_objects (counted kinds,
declarations for the rest); which tenant it belongs to by gpu_tenants (the cluster its
provider reaches). Values unknown at preview count at the least they can be, so they are
refused when even that has no room, and said openly otherwise. Props are read-only proxies
with float numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_objects import workload_of  # noqa: E402
from gpu_tenants import Tenants, attribute, closed_network_config_problems, demand_of, tenants_for  # noqa: E402
from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.config.reference import tenants_schema  # noqa: E402
from components.domain.requests import Demand, quota_violations  # noqa: E402
from components.domain.rules import judge, pod_violations  # noqa: E402

CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "tenants": {
            **tenants_schema(),
            "description": "The tenants, exactly as in the stack config's gpu-tenancy:tenants (same model, same "
            "defaults). Leave out to use the stack's own.",
        }
    }
)


def _provider(args: Any) -> Any:
    return args.provider


def validate_tenant_known(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is None or not w.asks_for_gpu:
        return
    _, why = attribute(w, _provider(args), tenants_for(args.get_config()))
    if why:
        report_violation(f"{w.kind} {w.name} asks for GPUs but cannot be checked against a quota: {why}")


def validate_usage_countable(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is not None and w.asks_for_gpu and w.refusal:
        report_violation(f"{w.kind} {w.name} asks for GPUs in a way no quota can count: {w.refusal}")
    if w is not None and w.declared is not None:
        # Alone against the quota here: a stack policy sees a Helm release's outputs, not its values.
        tenants = tenants_for(args.get_config())
        tenant, _ = attribute(w, _provider(args), tenants)
        over = quota_violations(w.declared, tenants.by_name[tenant].quota.quota) if tenant else []
        if over:
            report_violation(f"tenant {tenant}: {w.kind} {w.name} declares more than its GPU quota: {'; '.join(over)}")


def validate_fits_one_card(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is None or not w.asks_for_gpu:
        return
    tenants = tenants_for(args.get_config())
    tenant, _ = attribute(w, _provider(args), tenants)
    if tenant is None:
        return
    t = tenants.by_name[tenant]
    d = demand_of(w, t, report_violation)
    if d is not None:
        for problem in pod_violations(d, t.fleet):
            report_violation(f"tenant {t.name}: {w.kind} {w.name}: {problem}")


def validate_unknown_values(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is None:
        return
    tenants = tenants_for(args.get_config())
    tenant, _ = attribute(w, _provider(args), tenants)
    if tenant is not None:
        demand_of(w, tenants.by_name[tenant], lambda _msg: None)
    if w.unknown and (w.counted or w.mentions):
        report_violation(
            f"could not check {w.kind} {w.name} at preview: unknown {', '.join(sorted(set(w.unknown)))} (counted "
            "at the least it can be: one replica, one vGPU; the quota policy refuses it when even that has no room)"
        )


def _stack_demands(args: StackValidationArgs) -> tuple[dict[str, list[Demand]], Tenants]:
    tenants = tenants_for(args.get_config())
    per_tenant: dict[str, list[Demand]] = {n: [] for n in tenants.by_name}
    for r in args.resources:
        w = workload_of(r.resource_type, r.props, r.name)
        if w is None or not w.asks_for_gpu:
            continue
        tenant, _ = attribute(w, _provider(r), tenants)
        if tenant is None:
            continue  # gpu-tenant-known blocks it, with the reason
        d = demand_of(w, tenants.by_name[tenant], lambda _msg: None)
        if d is not None:
            per_tenant[tenant].append(d)
    return per_tenant, tenants


def validate_quota(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    per_tenant, tenants = _stack_demands(args)
    for name, demands in per_tenant.items():
        t = tenants.by_name[name]
        problems = judge(demands, t.quota.quota, t.fleet).over_quota
        if problems:
            names = ", ".join(f"{d.name} {d.counted}" for d in demands)
            report_violation(f"tenant {name} is over its GPU quota: {'; '.join(problems)} (workloads: {names})")


def validate_fit(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    per_tenant, tenants = _stack_demands(args)
    for name, demands in per_tenant.items():
        t = tenants.by_name[name]
        first = judge(demands, t.quota.quota, t.fleet).unplaceable
        if first is not None:
            report_violation(f"tenant {name}: {first} cannot be placed on its fleet ({t.fleet.describe()})")


def validate_closed_network(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for problem in closed_network_config_problems():
        report_violation(problem)


POLICIES = [
    ResourceValidationPolicy(
        name="gpu-tenant-known",
        description="Every object asking for GPUs belongs to a tenant whose quota is configured.",
        validate=validate_tenant_known,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
    ResourceValidationPolicy(
        name="gpu-usage-countable",
        description="Every object naming nvidia.com/ resources is counted by the rulebook or declares its usage.",
        validate=validate_usage_countable,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
    ResourceValidationPolicy(
        name="gpu-request-fits-one-card",
        description="Each pod's GPU request fits one node of its tenant's cards, in integer MB.",
        validate=validate_fits_one_card,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
    ResourceValidationPolicy(
        name="gpu-values-unknown-at-preview",
        description="GPU requests that could not be checked at preview (values unknown until apply).",
        validate=validate_unknown_values,
        enforcement_level=EnforcementLevel.ADVISORY,
        config_schema=CONFIG_SCHEMA,
    ),
    StackValidationPolicy(
        name="gpu-quota-per-tenant",
        description="Each tenant's GPU requests (x replicas, plus rollout surge) must stay within its quota.",
        validate=validate_quota,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
    StackValidationPolicy(
        name="closed-network-sources",
        description="The registry mirror, image overrides and chart sources are valid (the stack config's own checks).",
        validate=validate_closed_network,
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
    StackValidationPolicy(
        name="gpu-fleet-fit",
        description="Each tenant's GPU workloads that must be scheduled can be placed on its fleet.",
        validate=validate_fit,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
]
