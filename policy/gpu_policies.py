"""The gpu-quotas pack's policies, kept apart from __main__.py (whose PolicyPack blocks forever).

Tenants come from the stack-config model (components.config.model.load_tenants), either from
the pack config `{"tenants": [...]}` (same shape as `gpu-tenancy:tenants`) or from the stack's
own `gpu-tenancy:tenants`; every verdict comes from the rulebook (components.gpu.rules), the
code the program's config validation runs. So preview and config validation cannot disagree.

The pack fails closed: a GPU object it cannot check against a configured quota is a mandatory
violation that says how to fix it. Which tenant an object belongs to, in this order:
  1. its label `gpu-tenancy/tenant` (it must name a configured tenant);
  2. the tenant whose Kubernetes provider creates it (`<tenant>-cp-k8s`, the program's own);
  3. the only tenant, when exactly one is configured.
A label that names another tenant than the provider's is refused: usage cannot be moved to
another tenant's quota. Values unknown at preview are said openly (advisory); replicas unknown
at preview count as one. Props are read-only proxies with float numbers.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError  # noqa: E402

from components.config.model import ConfigError, TenantConfig, load_tenants, tenants_schema  # noqa: E402
from components.config.names import FAIL_ON_PENDING_ANNOTATION, TENANT_LABEL, tenant_provider  # noqa: E402
from components.gpu.rules import Demand, RequestError, judge, pod_request, pod_violations  # noqa: E402

PROJECT = "gpu-tenancy"
# Kubernetes types whose objects carry a pod spec, and where it sits.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
REPLICA_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "replicas"),
    "StatefulSet": ("spec", "replicas"),
    "ReplicaSet": ("spec", "replicas"),
    "Job": ("spec", "parallelism"),
    "CronJob": ("spec", "jobTemplate", "spec", "parallelism"),
}

CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "tenants": {
            **tenants_schema(),
            "description": "The tenants, exactly as in the stack config's gpu-tenancy:tenants (same model, same "
            "defaults). Leave out to use the stack's own.",
        }
    }
)
FIX = (
    'give the pack config {"tenants": [...]} (as in gpu-tenancy:tenants) with --policy-pack-config, or set '
    "gpu-tenancy:tenants in the stack"
)

# The stack's config as the engine sent it to the pack (see receive_stack_config).
STACK_CONFIG: dict[str, str] = {}
STACK_TENANTS_KEY = f"{PROJECT}:tenants"
STACK_CLUSTER_KEY = f"{PROJECT}:cluster"


def receive_stack_config() -> None:
    """Keep the stack's config the engine sends, so the pack can read the tenants' quotas.

    With a language plugin the engine sends the stack config only through the analyzer's
    ConfigureStack call, which pulumi-policy 1.21.0 answers without keeping it (and Pulumi's own
    runtime config is per-context, invisible to the threads that run the policies); this wraps
    that call to store the config in a plain module-level dict first.
    """
    from pulumi_policy import policy as pack_runtime

    servicer = pack_runtime._PolicyAnalyzerServicer
    original = servicer.ConfigureStack
    if getattr(original, "_keeps_config", False):
        return

    def configure_stack(self: Any, request: Any, context: Any) -> Any:
        STACK_CONFIG.clear()
        STACK_CONFIG.update(dict(request.config))
        return original(self, request, context)

    configure_stack._keeps_config = True  # type: ignore[attr-defined]
    servicer.ConfigureStack = configure_stack


@dataclass(frozen=True)
class Tenants:
    """The configured tenants by name, or why there are none to check against."""

    by_name: dict[str, TenantConfig]
    problem: str = ""


def _plain(value: Any) -> Any:
    """Policy config arrives as read-only proxies with float numbers: back to JSON values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _json(key: str) -> Any:
    try:
        return json.loads(STACK_CONFIG.get(key, "null"))
    except ValueError:
        return None


def tenants_for(config: Mapping[str, Any] | None) -> Tenants:
    raw = _plain((config or {}).get("tenants"))
    source = "the pack config"
    cluster = None
    if not raw:
        raw, cluster, source = _json(STACK_TENANTS_KEY), _json(STACK_CLUSTER_KEY), f"the stack's {STACK_TENANTS_KEY}"
    if not raw:
        return Tenants({}, f"no tenant quota is configured: {FIX}")
    return _tenants(json.dumps([raw, cluster], sort_keys=True), source)


@functools.lru_cache(maxsize=8)
def _tenants(raw_json: str, source: str) -> Tenants:
    """Validated once per distinct config: every policy call of a preview asks for it."""
    raw, cluster = json.loads(raw_json)
    try:
        found = load_tenants(PROJECT, raw, cluster if isinstance(cluster, Mapping) else None)
    except ConfigError as exc:
        return Tenants({}, f"the tenants in {source} are invalid, so nothing can be checked: {exc}")
    return Tenants({t.name: t for t in found})


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _safe(fn: Callable[[], Any], unknown: list[str], what: str) -> Any:
    try:
        return fn()
    except UnknownValueError:
        unknown.append(what)
        return None


@dataclass
class Workload:
    """What one Kubernetes object asks for: its containers' resources, times its replicas."""

    kind: str
    name: str
    replicas: int
    containers: list[tuple[str, Mapping[str, Any]]]
    must_fit: bool = True
    label: str | None = None
    unknown: list[str] = field(default_factory=list)

    @property
    def asks_for_gpu(self) -> bool:
        return any(str(k).startswith("nvidia.com/") for _, res in self.containers for k in res)


def workload_of(resource_type: str, props: Mapping[str, Any], name: str) -> Workload | None:
    """The pod template of an object, its GPU containers (init containers too) and replicas."""
    path = POD_SPEC_PATHS.get(resource_type)
    if path is None:
        return None
    unknown: list[str] = []
    kind = resource_type.rsplit(":", 1)[1]
    obj_name = _safe(lambda: _get(props, "metadata", "name"), unknown, "metadata.name") or name
    labels = _safe(lambda: _get(props, "metadata", "labels"), unknown, "metadata.labels")
    label = labels.get(TENANT_LABEL) if isinstance(labels, Mapping) else None
    annotations = _safe(lambda: _get(props, "metadata", "annotations"), unknown, "metadata.annotations")
    must_fit = not (isinstance(annotations, Mapping) and annotations.get(FAIL_ON_PENDING_ANNOTATION) == "false")
    replicas: Any = 1
    if kind in REPLICA_PATHS:
        where = ".".join(REPLICA_PATHS[kind])
        replicas = _safe(lambda: _get(props, *REPLICA_PATHS[kind]), unknown, where)
        if replicas is None:
            replicas = 1  # the API's default, and the count for a value unknown at preview
    spec = _safe(lambda: _get(props, *path), unknown, ".".join(path))
    containers: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(spec, Mapping):
        for group in ("initContainers", "containers"):
            items = _safe(lambda g=group: spec.get(g), unknown, f"{'.'.join(path)}.{group}") or []
            if not isinstance(items, Sequence):
                continue
            for i, c in enumerate(items):
                cname = _safe(lambda c=c: c.get("name"), unknown, f"{group}[{i}].name") or f"{group}[{i}]"
                limits = _safe(lambda c=c: _get(c, "resources", "limits"), unknown, f"{cname}.resources.limits")
                requests = _safe(lambda c=c: _get(c, "resources", "requests"), unknown, f"{cname}.resources.requests")
                res = limits if isinstance(limits, Mapping) and limits else requests
                if isinstance(res, Mapping):
                    containers.append((str(cname), res))
    return Workload(
        kind, str(obj_name), int(replicas), containers, must_fit, label if isinstance(label, str) else None, unknown
    )


def provider_tenant(provider_name: str | None, tenants: Mapping[str, TenantConfig]) -> str | None:
    return next((name for name in tenants if provider_name == tenant_provider(name)), None)


def attribute(w: Workload, provider_name: str | None, tenants: Tenants) -> tuple[str | None, str]:
    """(tenant, '') or (None, why the object cannot be checked, with the fix)."""
    if tenants.problem:
        return None, tenants.problem
    by_provider = provider_tenant(provider_name, tenants.by_name)
    configured = ", ".join(sorted(tenants.by_name))
    if w.label is not None:
        if w.label not in tenants.by_name:
            return None, (
                f"it is labelled {TENANT_LABEL}={w.label}, a tenant with no quota configured (configured: "
                f"{configured}); fix the label or configure that tenant"
            )
        if by_provider is not None and by_provider != w.label:
            return None, (
                f"it is labelled {TENANT_LABEL}={w.label} but created through tenant {by_provider}'s provider; "
                "a label cannot move usage to another tenant's quota"
            )
        return w.label, ""
    if by_provider is not None:
        return by_provider, ""
    if len(tenants.by_name) == 1:
        return next(iter(tenants.by_name)), ""
    return None, f"cannot tell which tenant it belongs to (configured: {configured}); label it {TENANT_LABEL}=<tenant>"


def demand_of(w: Workload, t: TenantConfig, report: Callable[[str], None]) -> Demand | None:
    """The rulebook's view of the object; a malformed request is reported, and left out."""
    try:
        plain = [(n, {str(k): res[k] for k in res}) for n, res in w.containers]
        pod = pod_request(plain, t.gpu.model)
    except UnknownValueError:
        w.unknown.append("resources")
        return None
    except RequestError as exc:
        report(f"tenant {t.name}: {w.kind} {w.name}, {exc} (HAMi would ignore the request)")
        return None
    if not pod.containers:
        return None
    replicas = t.fleet.nodes if w.kind == "DaemonSet" else w.replicas
    return Demand(f"{w.kind} {w.name}", pod, replicas, w.must_fit)


def _provider(args: Any) -> str | None:
    return args.provider.name if args.provider is not None else None


def validate_tenant_known(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is None or not w.asks_for_gpu:
        return
    _, why = attribute(w, _provider(args), tenants_for(args.get_config()))
    if why:
        report_violation(f"{w.kind} {w.name} asks for GPUs but cannot be checked against a quota: {why}")


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
        for problem in pod_violations(d.pod, t.fleet):
            report_violation(f"tenant {t.name}: {w.kind} {w.name}: {problem}")


def validate_unknown_values(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w = workload_of(args.resource_type, args.props, args.name)
    if w is None:
        return
    tenants = tenants_for(args.get_config())
    tenant, _ = attribute(w, _provider(args), tenants)
    if tenant is not None:
        demand_of(w, tenants.by_name[tenant], lambda _msg: None)
    if w.unknown:
        counted = " (replicas counted as 1)" if any("replicas" in u or "parallelism" in u for u in w.unknown) else ""
        report_violation(
            f"could not check {w.kind} {w.name} at preview: unknown {', '.join(sorted(set(w.unknown)))}{counted}"
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
            names = ", ".join(f"{d.name} x{d.replicas}" for d in demands)
            report_violation(f"tenant {name} is over its GPU quota: {'; '.join(problems)} (workloads: {names})")


def validate_fit(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    per_tenant, tenants = _stack_demands(args)
    for name, demands in per_tenant.items():
        t = tenants.by_name[name]
        first = judge(demands, t.quota.quota, t.fleet).unplaceable
        if first is not None:
            report_violation(f"tenant {name}: {first} cannot be placed on its fleet ({t.fleet.describe()})")


POLICIES = [
    ResourceValidationPolicy(
        name="gpu-tenant-known",
        description="Every object asking for GPUs belongs to a tenant whose quota is configured.",
        validate=validate_tenant_known,
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
        description="The sum of each tenant's GPU requests (x replicas) must stay within its quota.",
        validate=validate_quota,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
    StackValidationPolicy(
        name="gpu-fleet-fit",
        description="Each tenant's GPU workloads that must be scheduled can be placed on its fleet.",
        validate=validate_fit,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
]
