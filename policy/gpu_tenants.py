"""Where the gpu-quotas pack's tenants come from, and which tenant an object belongs to.

Tenants come from the stack-config model (components.config.load.load_tenants), either from the
pack config `{"tenants": [...]}` (same shape as `gpu-tenancy:tenants`) or from the stack's own
`gpu-tenancy:tenants`, validated once per distinct config. An object belongs to the tenant whose
cluster its provider reaches (the provider's endpoint against each tenant's
`managementIp:apiPort`); a tenant label must agree with it, and only a single-tenant stack
attributes an object whose provider's cluster is unknown at preview. What it asks for becomes a
Demand, values unknown at preview at the least they can be (one replica, one vGPU).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_objects import STRATEGY_PATHS, Workload, safe  # noqa: E402
from pulumi_policy.proxy import UnknownValueError  # noqa: E402

from components.config.load import closed_network_problems, load_tenants  # noqa: E402
from components.config.model import ClusterConfig, TenantConfig  # noqa: E402
from components.config.problems import ConfigError  # noqa: E402
from components.domain.hami_annotations import RES_GPU  # noqa: E402
from components.domain.names import PROJECT, TENANT_LABEL  # noqa: E402
from components.domain.requests import Demand, PodRequest, RequestError, demand  # noqa: E402
from components.domain.rollouts import RolloutError, surge  # noqa: E402

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
    # The management address the tenants' API servers listen on (their NodePorts).
    address: str = ""

    def endpoint(self, name: str) -> str:
        return f"{self.address}:{self.by_name[name].api_port}"


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


# The project directory: chart directories in `charts` are relative to it, as at `up`.
PROJECT_DIR = Path(__file__).resolve().parents[1]
CLOSED_NETWORK_KEYS = ("mirror", "images", "charts")


def closed_network_config_problems() -> list[str]:
    """The stack's `mirror`, `images` and `charts` keys judged by the config's own reader: each
    problem in the words `pulumi up` uses (`gpu-tenancy:mirror.endpoint: ...`)."""
    raw = {key: _json(f"{PROJECT}:{key}") for key in CLOSED_NETWORK_KEYS}
    return closed_network_problems(PROJECT, raw, PROJECT_DIR)


def tenants_for(config: Mapping[str, Any] | None) -> Tenants:
    raw = _plain((config or {}).get("tenants"))
    source = "the pack config"
    cluster = _json(STACK_CLUSTER_KEY)
    if not raw:
        raw, source = _json(STACK_TENANTS_KEY), f"the stack's {STACK_TENANTS_KEY}"
    if not raw:
        return Tenants({}, f"no tenant quota is configured: {FIX}")
    return _tenants(json.dumps([raw, cluster], sort_keys=True), source)


@functools.lru_cache(maxsize=8)
def _tenants(raw_json: str, source: str) -> Tenants:
    """Validated once per distinct config: every policy call of a preview asks for it."""
    raw, cluster = json.loads(raw_json)
    cluster = cluster if isinstance(cluster, Mapping) else None
    try:
        found = load_tenants(PROJECT, raw, cluster)
        address = ClusterConfig.model_validate(cluster or {}).management_ip
    except (ConfigError, ValueError) as exc:
        return Tenants({}, f"the tenants in {source} are invalid, so nothing can be checked: {exc}")
    return Tenants({t.name: t for t in found}, address=str(address))


def provider_endpoint(provider: Any) -> str | None:
    """host:port of the API server a Kubernetes provider reaches, from its known inputs: its
    kubeconfig's selected cluster, or its `cluster` input when that names an endpoint (the
    program's tenant providers do, so they are known before their kubeconfig is); None: unknown."""
    if provider is None:
        return None
    props = provider.props
    unknown: list[str] = []
    cluster = safe(lambda: props.get("cluster"), unknown, "cluster")
    context = safe(lambda: props.get("context"), unknown, "context")
    text = safe(lambda: props.get("kubeconfig"), unknown, "kubeconfig")
    server = None
    if isinstance(text, str) and text:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, Mapping):
            ctx_name = context or doc.get("current-context")
            ctx = next((c.get("context", {}) for c in doc.get("contexts") or [] if c.get("name") == ctx_name), {})
            wanted = cluster or ctx.get("cluster")
            server = next(
                (c.get("cluster", {}).get("server") for c in doc.get("clusters") or [] if c.get("name") == wanted),
                None,
            )
    if server is None and isinstance(cluster, str) and cluster.startswith("https://"):
        server = cluster
    if not isinstance(server, str):
        return None
    parsed = urlparse(server)
    return f"{parsed.hostname}:{parsed.port or 443}" if parsed.hostname else None


def attribute(w: Workload, provider: Any, tenants: Tenants) -> tuple[str | None, str]:
    """(tenant, '') or (None, why the object cannot be checked, with the fix).

    The cluster decides: the tenant whose API server the object's provider reaches. A label
    must agree with it; where the provider's cluster cannot be told at preview, only a stack with
    a single tenant attributes (there is no other quota to move usage to)."""
    if tenants.problem:
        return None, tenants.problem
    configured = ", ".join(sorted(tenants.by_name))
    endpoint = provider_endpoint(provider)
    by_endpoint = next((n for n in tenants.by_name if tenants.endpoint(n) == endpoint), None)
    via = f"provider {provider.name!r}" if provider is not None else "the default provider"
    if w.label is not None and w.label not in tenants.by_name:
        return None, (
            f"it is labelled {TENANT_LABEL}={w.label}, a tenant with no quota configured (configured: "
            f"{configured}); fix the label or configure that tenant"
        )
    if endpoint is not None and by_endpoint is None:
        known = ", ".join(f"{n} {tenants.endpoint(n)}" for n in sorted(tenants.by_name))
        return None, (
            f"it is created through {via}, which reaches {endpoint}: the API server of no configured tenant "
            f"({known}); its GPUs would be counted against nobody's quota"
        )
    if by_endpoint is not None:
        if w.label is not None and w.label != by_endpoint:
            return None, (
                f"it is labelled {TENANT_LABEL}={w.label} but created through {via}, which reaches tenant "
                f"{by_endpoint}'s API server ({endpoint}); a label cannot move usage to another tenant's quota"
            )
        return by_endpoint, ""
    if len(tenants.by_name) == 1:
        only = next(iter(tenants.by_name))
        if w.label is None or w.label == only:
            return only, ""
    return None, (
        f"cannot tell which tenant's cluster {via} reaches at preview (configured: {configured}); give the provider "
        "a kubeconfig known at preview, or its cluster input set to the tenant's endpoint (as the program's own do)"
    )


def _least(res: Mapping[str, Any], w: Workload, cname: str) -> dict[str, Any]:
    """A container's resources with each value unknown at preview replaced by the least it can be."""
    out: dict[str, Any] = {}
    for k in res:
        try:
            out[str(k)] = res[k]
        except UnknownValueError:
            w.unknown.append(f"{cname}.resources[{k}]")
            if str(k).startswith("nvidia.com/"):
                out[str(k)] = 1 if k == RES_GPU else 0
    return out


def demand_of(w: Workload, t: TenantConfig, report: Callable[[str], None]) -> Demand | None:
    """The rulebook's view of the object; a malformed request is reported, and left out."""
    if not w.counted:
        if w.declared is None:
            return None
        return Demand(f"{w.kind} {w.name} (declared)", PodRequest(()), declared=w.declared, must_fit=False)
    replicas = t.fleet.nodes if w.kind == "DaemonSet" else w.replicas
    try:
        plain = [(n, _least(res, w, n)) for n, res in w.containers]
        d = demand(f"{w.kind} {w.name}", plain, t.fleet.models, w.types, replicas, w.must_fit)
    except UnknownValueError:
        w.unknown.append("resources")
        return None
    except RequestError as exc:
        report(f"tenant {t.name}: {w.kind} {w.name}, {exc} (HAMi would ignore the request)")
        return None
    if not d.pod.containers:
        return None
    extra = _surge(w, replicas, report)
    least = " (values unknown at preview, counted at their least)" if w.unknown else ""
    return replace(d, name=f"{d.name}{least}", surge=extra)


def _surge(w: Workload, replicas: int, report: Callable[[str], None]) -> int:
    """The pods its rollout starts above `replicas`; a strategy unknown at preview counts at its least (0)."""
    where = ".".join(STRATEGY_PATHS.get(w.kind, ()))
    if where and any(u.startswith(where) for u in w.unknown):
        return 0
    try:
        return surge(w.kind, w.strategy, replicas)
    except UnknownValueError:
        w.unknown.append("strategy")
        return 0
    except RolloutError as exc:
        report(f"{w.kind} {w.name}: its rollout's maxSurge {exc}")
        return 0
