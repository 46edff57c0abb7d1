"""The gpu-quotas pack's policies, kept apart from __main__.py (whose PolicyPack blocks forever).

Numbers come from components.gpu.rules (the same code the program's config validation runs), so
preview and config validation cannot disagree. Props are read-only proxies with float numbers;
everything here reads them through collections.abc and int-converts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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

from components.config.names import TENANT_LABEL  # noqa: E402
from components.gpu.catalog import GPU_MODELS, GpuModel  # noqa: E402
from components.gpu.rules import (  # noqa: E402
    GpuRequest,
    Quota,
    RequestError,
    first_unplaceable,
    parse_request,
    quota_violations,
    single_card_violations,
    total_usage,
)

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

CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "tenants": {
            "type": "object",
            "description": "Per tenant: GPU model, fleet size and quota (the stack config's numbers).",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "model": {"type": "string", "enum": sorted(GPU_MODELS)},
                    "nodes": {"type": "integer", "minimum": 1},
                    "cardsPerNode": {"type": "integer", "minimum": 1},
                    "quota": {
                        "type": "object",
                        "properties": {
                            "gpus": {"type": "integer", "minimum": 0},
                            "gpumemMb": {"type": "integer", "minimum": 0},
                            "gpucoresPercent": {"type": "integer", "minimum": 0},
                        },
                        "required": ["gpus", "gpumemMb", "gpucoresPercent"],
                    },
                },
                "required": ["model", "nodes", "cardsPerNode", "quota"],
            },
            "default": {},
        }
    }
)


@dataclass(frozen=True)
class TenantLimits:
    name: str
    model: GpuModel
    nodes: int
    cards_per_node: int
    quota: Quota


def tenants_from_config(config: Mapping[str, Any] | None) -> dict[str, TenantLimits]:
    out = {}
    for name, t in ((config or {}).get("tenants") or {}).items():
        q = t["quota"]
        out[name] = TenantLimits(
            name=name,
            model=GPU_MODELS[t["model"]],
            nodes=int(t["nodes"]),
            cards_per_node=int(t["cardsPerNode"]),
            quota=Quota(gpus=int(q["gpus"]), gpumem_mb=int(q["gpumemMb"]), gpucores=int(q["gpucoresPercent"])),
        )
    return out


# The stack's config as the engine sent it to the pack (see receive_stack_config).
STACK_CONFIG: dict[str, str] = {}
STACK_TENANTS_KEY = "gpu-tenancy:tenants"


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


def tenants_from_stack() -> dict[str, TenantLimits]:
    """Without pack config, the stack's own `gpu-tenancy:tenants`, so PR review needs no second
    copy of the quotas. Tenants with malformed entries are left to the program's validation."""
    try:
        raw = json.loads(STACK_CONFIG.get(STACK_TENANTS_KEY, "null"))
    except ValueError:
        return {}
    if not isinstance(raw, list):
        return {}
    config = {}
    for t in raw:
        try:
            config[t["name"]] = {
                "model": t["gpu"]["model"],
                "nodes": t.get("workers", 1),
                "cardsPerNode": t["gpu"].get("cardsPerNode", 1),
                "quota": t["quota"],
            }
        except (KeyError, TypeError, AttributeError):
            continue
    try:
        return tenants_from_config({"tenants": config})
    except (KeyError, TypeError, ValueError):
        return {}


def limits_for(config: Mapping[str, Any] | None) -> dict[str, TenantLimits]:
    return tenants_from_config(config) or tenants_from_stack()


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


@dataclass
class Workload:
    """What one Kubernetes object asks for: its containers' requests, times its replicas."""

    kind: str
    name: str
    tenant: str | None
    replicas: int
    containers: list[tuple[str, Mapping[str, Any]]]
    unknown: list[str]


def tenant_of(props: Mapping[str, Any], provider_name: str | None, urn: str, tenants: Mapping[str, Any]) -> str | None:
    """The tenant an object belongs to: its label, else its provider's or URN's tenant name, else
    the only tenant configured (a team stack)."""
    label = _get(props, "metadata", "labels")
    if isinstance(label, Mapping) and isinstance(label.get(TENANT_LABEL), str):
        return label[TENANT_LABEL]
    for name in sorted(tenants, key=len, reverse=True):
        if provider_name and provider_name.startswith(f"{name}-"):
            return name
        if f"::{name}-" in urn or f"${name}-" in urn or f"GpuTenant::{name}" in urn:
            return name
    if len(tenants) == 1:
        return next(iter(tenants))
    return None


def workload_of(
    resource_type: str, props: Mapping[str, Any], name: str, tenant: str | None, daemon_nodes: int = 1
) -> Workload | None:
    path = POD_SPEC_PATHS.get(resource_type)
    if path is None:
        return None
    unknown: list[str] = []
    kind = resource_type.rsplit(":", 1)[1]
    obj_name = _safe(lambda: _get(props, "metadata", "name"), unknown, "metadata.name") or name
    spec = _safe(lambda: _get(props, *path), unknown, ".".join(path))
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        replicas = _safe(lambda: _get(props, "spec", "replicas"), unknown, "spec.replicas")
        replicas = 1 if replicas is None and "spec.replicas" not in unknown else replicas
    elif kind == "Job":
        replicas = _safe(lambda: _get(props, "spec", "parallelism"), unknown, "spec.parallelism")
        replicas = 1 if replicas is None and "spec.parallelism" not in unknown else replicas
    elif kind == "CronJob":
        replicas = _safe(
            lambda: _get(props, "spec", "jobTemplate", "spec", "parallelism"),
            unknown,
            "spec.jobTemplate.spec.parallelism",
        )
        replicas = 1 if replicas is None and not unknown else replicas
    elif kind == "DaemonSet":
        replicas = daemon_nodes
    else:
        replicas = 1
    containers: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(spec, Mapping):
        for field in ("initContainers", "containers"):
            items = _safe(lambda f=field: spec.get(f), unknown, f"{'.'.join(path)}.{field}") or []
            if isinstance(items, Sequence):
                for i, c in enumerate(items):
                    cname = _safe(lambda c=c: c.get("name"), unknown, f"{field}[{i}].name") or f"{field}[{i}]"
                    limits = _safe(lambda c=c: _get(c, "resources", "limits"), unknown, f"{cname}.resources.limits")
                    requests = _safe(
                        lambda c=c: _get(c, "resources", "requests"), unknown, f"{cname}.resources.requests"
                    )
                    res = limits if isinstance(limits, Mapping) and limits else requests
                    if isinstance(res, Mapping):
                        containers.append((str(cname), res))
    return Workload(kind, str(obj_name), tenant, int(replicas or 0), containers, unknown)


def _safe(fn: Callable[[], Any], unknown: list[str], what: str) -> Any:
    try:
        return fn()
    except UnknownValueError:
        unknown.append(what)
        return None


def requests_of(w: Workload, t: TenantLimits, report: Callable[[str], None]) -> list[tuple[str, GpuRequest]]:
    """Effective HAMi request of each GPU container; malformed requests are reported."""
    out = []
    for cname, res in w.containers:
        try:
            plain = {str(k): res[k] for k in res}
            req = parse_request(plain, t.model)
        except UnknownValueError:
            w.unknown.append(f"{cname}.resources")
            continue
        except RequestError as exc:
            report(f"tenant {t.name}: {w.kind} {w.name}, container {cname}: {exc} (HAMi would ignore the request)")
            continue
        if req is not None:
            out.append((cname, req))
    return out


def _resource_args(args: ResourceValidationArgs) -> tuple[Workload | None, dict[str, TenantLimits]]:
    tenants = limits_for(args.get_config())
    provider = args.provider.name if args.provider is not None else None
    tenant = tenant_of(args.props, provider, args.urn, tenants)
    return workload_of(args.resource_type, args.props, args.name, tenant), tenants


def validate_fits_one_card(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w, tenants = _resource_args(args)
    if w is None or w.tenant not in tenants:
        return
    t = tenants[w.tenant]
    for cname, req in requests_of(w, t, report_violation):
        for problem in single_card_violations(req, t.model, t.cards_per_node):
            report_violation(f"tenant {t.name}: {w.kind} {w.name}, container {cname}: {problem}")


def validate_unknown_values(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    w, tenants = _resource_args(args)
    if w is None:
        return
    if w.tenant is None and tenants:
        gpu = any(str(k).startswith("nvidia.com/") for _, res in w.containers for k in res)
        if gpu:
            report_violation(
                f"could not check {w.kind} {w.name}: cannot tell which tenant it belongs to (label it {TENANT_LABEL})"
            )
        return
    if w.tenant in tenants:
        requests_of(w, tenants[w.tenant], lambda _msg: None)
    if w.unknown:
        report_violation(f"could not check {w.kind} {w.name} at preview: unknown {', '.join(sorted(set(w.unknown)))}")


def _stack_workloads(
    args: StackValidationArgs,
) -> tuple[dict[str, list[tuple[Workload, list[tuple[str, GpuRequest]]]]], dict[str, TenantLimits]]:
    tenants = limits_for(args.get_config())
    per_tenant: dict[str, list[tuple[Workload, list[tuple[str, GpuRequest]]]]] = {n: [] for n in tenants}
    for r in args.resources:
        provider = r.provider.name if r.provider is not None else None
        tenant = tenant_of(r.props, provider, r.urn, tenants)
        if tenant not in tenants:
            continue
        t = tenants[tenant]
        w = workload_of(r.resource_type, r.props, r.name, tenant, daemon_nodes=t.nodes)
        if w is None:
            continue
        reqs = requests_of(w, t, lambda _msg: None)
        if reqs:
            per_tenant[tenant].append((w, reqs))
    return per_tenant, tenants


def validate_quota(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    per_tenant, tenants = _stack_workloads(args)
    for name, items in per_tenant.items():
        t = tenants[name]
        usage = total_usage((req, w.replicas) for w, reqs in items for _, req in reqs)
        problems = quota_violations(usage, t.quota)
        if problems:
            names = ", ".join(f"{w.kind} {w.name} x{w.replicas}" for w, _ in items)
            report_violation(f"tenant {name} is over its GPU quota: {'; '.join(problems)} (workloads: {names})")


def validate_fit(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    per_tenant, tenants = _stack_workloads(args)
    for name, items in per_tenant.items():
        t = tenants[name]
        pods = []
        for w, reqs in items:
            for k in range(w.replicas):
                # one vGPU set per container; containers of one pod share its node
                for cname, req in reqs:
                    pods.append((f"{w.kind} {w.name}[{k}]/{cname}", req))
        first = first_unplaceable(pods, t.nodes, t.cards_per_node, t.model)
        if first is not None:
            report_violation(
                f"tenant {name}: {first} cannot be placed on its fleet "
                f"({t.nodes} node(s) x {t.cards_per_node} {t.model.key}, {t.model.memory_mb} MB / 100 % each)"
            )


POLICIES = [
    ResourceValidationPolicy(
        name="gpu-request-fits-one-card",
        description="Each container's GPU request must fit one card of its tenant's model, in integer MB.",
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
        description="Each tenant's GPU workloads must be placeable on its fleet of cards.",
        validate=validate_fit,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=CONFIG_SCHEMA,
    ),
]
