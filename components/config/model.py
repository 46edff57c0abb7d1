"""The stack config as one typed model (pydantic v2, camelCase keys as aliases), validated in
full before any resource is created.

`load_stack_config` reads each section on its own, so every problem is found in one pass, then
checks what spans fields (ports, networks, names, quota and fit through the rulebook). Every
problem names its full key (`gpu-tenancy:tenants[1].quota.gpumemMb`), what is allowed and how to
fix it; they come back together in one ConfigError. The policy pack builds its tenants with
`load_tenants`, from the same model, with the same defaults.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components.config import versions
from components.config.names import RESERVED_NAMESPACES, worker_name
from components.gpu.catalog import GPU_MODELS, MOCK_PLUGIN_MAX_MB_PER_NODE, GpuModel
from components.gpu.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM
from components.gpu.rules import (
    INT32_MAX,
    Demand,
    Fleet,
    GpuRequest,
    PodRequest,
    Quota,
    RequestError,
    judge,
    pod_request,
    pod_violations,
)

NODE_PORT_RANGE = range(30000, 32768)
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")
_STACK_REF = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_UNITS = re.compile(r"\s*[0-9.]+\s*[KMGTkmgt]i?[Bb]?\s*")
WORKLOAD_KINDS = ("Pod", "Deployment")
MAX_CLUSTER_NAME = 20
MAX_TENANT_NAME = 30
MAX_WORKLOAD_NAME = 50
MAX_WORKERS = 10
# Simulated nodes are API objects only; the bench shows 1,000 of them, the limit leaves headroom.
MAX_KWOK_NODES = 5000
MAX_EXTERNAL_NODES = 1000
MAX_POOL_NAME = 20
MAX_CARDS_PER_NODE = 8
MAX_REPLICAS = 100
MAX_QUOTA = 10**9
HOSTNAME_MAX = 63
# kube-controller-manager gives each node a /24 of the pod CIDR (its IPv4 default).
NODE_POD_PREFIX = 24

MODE_DOCKER = "docker"
MODE_KUBECONFIG = "kubeconfig"
# Worker pool modes: kindest/node containers joined by kubeadm; KWOK's simulated nodes; the
# team's own machines, joined with a bootstrap token the stack outputs.
POOL_DOCKER = "docker"
POOL_KWOK = "kwok"
POOL_EXTERNAL = "external"
POOL_MODES = (POOL_DOCKER, POOL_KWOK, POOL_EXTERNAL)
# Docker nodes are limited per tenant (all its docker pools together), the others per pool.
POOL_MAX_NODES = {POOL_KWOK: MAX_KWOK_NODES, POOL_EXTERNAL: MAX_EXTERNAL_NODES}
# What a stack builds: the whole lab; the shared platform (cluster + Kamaji) only; or one team's
# tenants on a platform stack it reaches through a StackReference.
ROLE_LAB = "lab"
ROLE_PLATFORM = "platform"
ROLE_TEAM = "team"
# A team stack's secret config key: its team's management-cluster token (TeamAccess's account).
MANAGEMENT_TOKEN_KEY = "managementToken"
ROLES = (ROLE_LAB, ROLE_PLATFORM, ROLE_TEAM)
_ERROR = "gpu_tenancy"


class ConfigError(ValueError):
    """Every problem found in the stack config, each naming its key."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = "\n".join(f"  {key}: {msg}" for key, msg in problems)
        super().__init__(f"invalid stack config ({len(problems)} problem(s)):\n{lines}")


def _fail(message: str) -> PydanticCustomError:
    # The text travels in the context, so braces in a user's value are never formatted.
    return PydanticCustomError(_ERROR, "{msg}", {"msg": message})


# -- field types: each checks its own value and says what is allowed ------------------------
def _integer(lo: int, hi: int, unit: str = "", mb: bool = False) -> Any:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            hint = ""
            if mb and isinstance(value, str) and _UNITS.fullmatch(value):
                hint = " (units are not accepted: give plain MB, e.g. 10240 for 10Gi)"
            what = f"a plain integer in MB ({lo}-{hi})" if mb else f"an integer {lo}-{hi}{unit}"
            raise _fail(f"must be {what}, got {value!r}{hint}")
        if not lo <= value <= hi:
            raise _fail(f"must be {lo}-{hi}{unit}, got {value}")
        return value

    return Annotated[int, BeforeValidator(check), Field(ge=lo, le=hi)]


def _string(pattern: re.Pattern[str] | None, what: str, max_len: int = 253) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or not value:
            raise _fail(f"must be a non-empty string ({what}), got {value!r}")
        if len(value) > max_len or (pattern is not None and not pattern.match(value)):
            raise _fail(f"must be {what}, got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), Field(min_length=1, max_length=max_len)]


def _choice(allowed: Sequence[str], message: Callable[[object], str] | None = None) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise _fail(message(value) if message else f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), WithJsonSchema({"type": "string", "enum": list(allowed)})]


def _network(value: object) -> str:
    if not isinstance(value, str) or "/" not in value:
        raise _fail(f"must be an IPv4 network with its prefix length, like 10.244.0.0/16, got {value!r}")
    try:
        ipaddress.IPv4Network(value)
    except ValueError as exc:
        raise _fail(f"must be an IPv4 network like 10.244.0.0/16, got {value!r} ({exc})") from None
    return value


def _address(value: object) -> str:
    try:
        ipaddress.IPv4Address(value if isinstance(value, str) else "")
    except ValueError:
        raise _fail(f"must be an IPv4 address, got {value!r}") from None
    return value  # type: ignore[return-value]


def _gpu_model(value: object) -> GpuModel:
    if isinstance(value, GpuModel):
        return value
    if not isinstance(value, str) or value not in GPU_MODELS:
        raise _fail(f"unknown GPU model {value!r}; allowed: {', '.join(sorted(GPU_MODELS))}")
    return GPU_MODELS[value]


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(f"must be true or false, got {value!r}")
    return value


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(c, str) for c in value):
        raise _fail(f"must be a list of strings, got {value!r}")
    return tuple(value)


def _list_of(what: str) -> Callable[[object], object]:
    def check(value: object) -> object:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise _fail(f"must be a list of {what}, got {value!r}")
        return value

    return check


def _object(keys: Callable[[], list[str]]) -> Callable[[object], object]:
    """A nested section must be a mapping; None stands for an empty one."""

    def check(value: object) -> object:
        if value is None:
            return {}
        if isinstance(value, BaseModel):
            return value
        if not isinstance(value, Mapping):
            raise _fail(f"must be an object with keys {', '.join(keys())}, got {value!r}")
        return value

    return check


DnsLabel = _string(_DNS_1123, "a DNS label (a-z, 0-9, '-')", 63)
Network = Annotated[str, BeforeValidator(_network), Field(pattern=r"^[0-9.]+/[0-9]+$")]
Address = Annotated[str, BeforeValidator(_address)]
Port = _integer(NODE_PORT_RANGE.start, NODE_PORT_RANGE.stop - 1, " (the management cluster's NodePort range)")
Model = Annotated[
    GpuModel,
    BeforeValidator(_gpu_model),
    PlainSerializer(lambda m: m.key, return_type=str),
    WithJsonSchema({"type": "string", "enum": sorted(GPU_MODELS)}),
]
Bool = Annotated[bool, BeforeValidator(_boolean)]
Strings = Annotated[tuple[str, ...], BeforeValidator(_strings)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        validate_default=True,
        # Python code may build a model by field name; stack config is read by its keys only.
        validate_by_name=True,
        validate_by_alias=True,
    )

    @classmethod
    def keys(cls) -> list[str]:
        return [f.alias or n for n, f in cls.model_fields.items()]


def _section(cls: type[_Model]) -> Any:
    return Annotated[cls, BeforeValidator(_object(cls.keys))]


# -- the sections -----------------------------------------------------------------------------
class ClusterConfig(_Model):
    """The management cluster: a k3s container on a Docker network, or an adopted kubeconfig."""

    mode: _choice(
        (MODE_DOCKER, MODE_KUBECONFIG), lambda v: f"must be '{MODE_DOCKER}' or '{MODE_KUBECONFIG}', got {v!r}"
    ) = Field(
        MODE_DOCKER,
        description="`docker` (a k3s container), or `kubeconfig` to adopt the cluster in the secret `kubeconfig`",
    )
    name: _string(_DNS_1035, f"a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters", MAX_CLUSTER_NAME) = Field(
        "gpu-lab", description="prefix of every Docker name (network, containers, volumes)"
    )
    subnet: Network = Field("172.30.0.0/24", description="the Docker network's IPv4 subnet")
    management_ip: Address = Field(
        "172.30.0.2", alias="managementIp", description="NodePort address of the management cluster, inside subnet"
    )
    bootstrap_token_minutes: _integer(1, 1440, " min") = Field(
        15, description="lifetime of a worker's bootstrap token; each is revoked as soon as its join is done"
    )


NODE_POLICIES = ("binpack", "spread")


class HamiConfig(_Model):
    """HAMi's scheduler as the stack runs it; the defaults were chosen by bench/hami_fleet.py."""

    node_lock_timeout: _string(_DURATION, "a Go duration like 30s or 5m", 32) = Field(
        "5m", description="passed as the scheduler's --node-lock-timeout, the only setting that takes effect"
    )
    kube_qps: _integer(1, 1000, " requests/s") = Field(
        200, description="HAMi scheduler's API request rate, --kube-qps (HAMi's own default is 5: ~0.5 pods/s)"
    )
    kube_burst: _integer(1, 2000, " requests") = Field(400, description="its --kube-burst, at least kubeQps")
    node_scheduler_policy: _choice(NODE_POLICIES) = Field(
        "spread",
        description="spread (least-used node first) or binpack (fill a node first: binds then queue on its lock)",
    )
    log_level: _integer(0, 10) = Field(
        1,
        description="klog -v of HAMi's extender and its kube-scheduler (the chart's 4 logs ~24 lines per node per pod)",
    )


class GpuFleet(_Model):
    model: Model = Field(description="the card model: " + ", ".join(sorted(GPU_MODELS)))
    cards_per_node: _integer(1, MAX_CARDS_PER_NODE) = Field(
        1, description="cards per GPU node (the nodes of the external, else kwok, else docker pools)"
    )


class QuotaConfig(_Model):
    gpus: _integer(1, MAX_QUOTA, " vGPUs") = Field(description="vGPUs the tenant's pods may hold together")
    gpumem_mb: _integer(1, MAX_QUOTA, " MB", mb=True) = Field(alias="gpumemMb", description="GPU memory, MB")
    gpucores: _integer(1, MAX_QUOTA, " %") = Field(alias="gpucoresPercent", description="GPU cores, % of one card")

    @property
    def quota(self) -> Quota:
        return Quota(gpus=self.gpus, gpumem_mb=self.gpumem_mb, gpucores=self.gpucores)


_RESOURCE_KEYS = {RES_GPU: "gpus", RES_GPUMEM: "gpumemMb", RES_GPUCORES: "gpucoresPercent"}


class WorkloadConfig(_Model):
    """A GPU workload a tenant's stack declares (created in the tenant, awaited by BindRelease)."""

    name: _string(_DNS_1123, f"a DNS label of at most {MAX_WORKLOAD_NAME} characters", MAX_WORKLOAD_NAME) = Field(
        description="the Pod's or Deployment's name"
    )
    kind: _choice(WORKLOAD_KINDS) = Field("Pod", description="Pod or Deployment")
    image: _string(None, "a container image") = Field(description="container image")
    command: Strings = Field((), description="container command")
    replicas: _integer(1, MAX_REPLICAS) = Field(1, description="Deployment replicas (a Pod has one)")
    namespace: DnsLabel = Field("default", description="tenant namespace (not a reserved one)")
    gpus: _integer(0, 64) | None = Field(None, description="nvidia.com/gpu: vGPUs per pod")
    gpumem_mb: _integer(0, INT32_MAX, " MB", mb=True) | None = Field(
        None, alias="gpumemMb", description="nvidia.com/gpumem: MB per vGPU, a plain integer"
    )
    gpucores_percent: _integer(0, 100, " %") | None = Field(
        None, description="nvidia.com/gpucores: % of one card per vGPU"
    )
    card_type: _string(None, "a card type substring") | None = Field(
        None, description="nvidia.com/use-gputype: a substring of the tenant's card type"
    )
    wait_seconds: _integer(5, 3600, " s") = Field(120, description="how long `up` waits for HAMi to bind each pod")
    fail_on_pending: Bool = Field(
        True,
        description="true: `up` fails if a pod is not bound in time, and the workload must fit the fleet; "
        "false: it may stay Pending (still counted against the quota)",
    )

    @property
    def limits(self) -> tuple[tuple[str, int], ...]:
        values = {RES_GPU: self.gpus, RES_GPUMEM: self.gpumem_mb, RES_GPUCORES: self.gpucores_percent}
        return tuple((res, v) for res, v in values.items() if v is not None)

    def pod(self, card: GpuModel) -> PodRequest:
        return pod_request([(self.name, dict(self.limits))], card)

    def request(self, card: GpuModel) -> GpuRequest:
        return self.pod(card).containers[0][1]

    def demand(self, card: GpuModel) -> Demand:
        return Demand(f"{self.kind} {self.name}", self.pod(card), self.replicas, self.fail_on_pending)


# A join token is short-lived: `up` renews it while machines are still to join.
DEFAULT_JOIN_TOKEN_HOURS = 2
MAX_JOIN_TOKEN_HOURS = 24


class PoolConfig(_Model):
    """A group of worker nodes of one mode (see POOL_MODES); a tenant has one or more."""

    name: _string(_DNS_1035, f"a DNS-1035 label of at most {MAX_POOL_NAME} characters", MAX_POOL_NAME) = Field(
        description="the pool's name, unique in its tenant; node names are <lab>-<tenant>-<pool>-<index>"
    )
    mode: _choice(POOL_MODES) = Field(
        POOL_DOCKER,
        description="`docker` (kindest/node containers), `kwok` (simulated nodes) or `external` (your machines)",
    )
    nodes: _integer(1, MAX_KWOK_NODES) = Field(
        1, description=f"nodes in the pool (docker at most {MAX_WORKERS}, external at most {MAX_EXTERNAL_NODES})"
    )
    join_token_hours: _integer(1, MAX_JOIN_TOKEN_HOURS, " h") | None = Field(
        None,
        description="external pools: lifetime of the join token the stack outputs "
        f"(default {DEFAULT_JOIN_TOKEN_HOURS}); `up` renews it while machines are still to join "
        "and revokes it once all have",
    )


DEFAULT_POOLS = ({"name": "worker", "mode": POOL_DOCKER, "nodes": 1},)


class TenantConfig(_Model):
    name: _string(
        _DNS_1035, f"a DNS-1035 label (a-z first, then a-z0-9-, at most {MAX_TENANT_NAME})", MAX_TENANT_NAME
    ) = Field(description="the tenant's name; every name the lab derives for it starts with it")
    kubernetes_version: _choice(
        tuple(versions.KIND_NODE_IMAGES),
        lambda v: f"no worker image is pinned for {v!r}; pinned: {', '.join(versions.KIND_NODE_IMAGES)}",
    ) = Field(versions.DEFAULT_TENANT_VERSION, description="one with a pinned worker image")
    pools: Annotated[tuple[PoolConfig, ...], BeforeValidator(_list_of("pools"))] = Field(
        DEFAULT_POOLS,
        description="worker pools: `name`, `mode`, `nodes` (default: one docker worker); at least one docker node",
    )
    gpu: _section(GpuFleet) = Field(description="`model` and `cardsPerNode` of every GPU node of the tenant")
    quota: _section(QuotaConfig) = Field(description="`gpus`, `gpumemMb`, `gpucoresPercent`")
    # None: 31443 + the tenant's index (31132 + index for Konnectivity); filled by load_stack_config.
    api_port: Port | None = Field(
        None, description="NodePort of the tenant API server (30000-32767, unique; default 31443 + the tenant's index)"
    )
    konnectivity_port: Port | None = Field(
        None, description="NodePort of its Konnectivity server (unique; default 31132 + the tenant's index)"
    )
    pod_cidr: Network = Field("10.244.0.0/16", description="tenant pod network, a /24 per node")
    service_cidr: Network = Field("10.96.0.0/16", description="tenant service network")
    workloads: Annotated[tuple[WorkloadConfig, ...], BeforeValidator(_list_of("workloads"))] = Field(
        (), description="GPU workloads the stack creates in the tenant"
    )

    @property
    def worker_image(self) -> str:
        return versions.KIND_NODE_IMAGES[self.kubernetes_version]

    @property
    def dns_service_ip(self) -> str:
        return str(ipaddress.IPv4Network(self.service_cidr)[10])

    def pools_of(self, mode: str) -> tuple[PoolConfig, ...]:
        return tuple(p for p in self.pools if p.mode == mode)

    @property
    def real_gpus(self) -> bool:
        """External pools bring real cards: HAMi's NVIDIA plugin, no fake inventory, no releaser."""
        return bool(self.pools_of(POOL_EXTERNAL))

    @property
    def gpu_pools(self) -> tuple[PoolConfig, ...]:
        """The pools whose nodes carry the tenant's cards: external pools, else kwok pools, else the
        docker pools. Docker workers beside kwok or external pools run the system pods and real
        non-GPU containers; the mock plugin could not advertise a large node's cards anyway."""
        for mode in (POOL_EXTERNAL, POOL_KWOK):
            if self.pools_of(mode):
                return self.pools_of(mode)
        return self.pools_of(POOL_DOCKER)

    @property
    def docker_nodes(self) -> int:
        return sum(p.nodes for p in self.pools_of(POOL_DOCKER))

    def node_names(self, lab: str, pool: PoolConfig) -> list[str]:
        """Names of the nodes this stack makes for a pool (external machines name themselves)."""
        return (
            [] if pool.mode == POOL_EXTERNAL else [worker_name(lab, self.name, pool.name, i) for i in range(pool.nodes)]
        )

    @property
    def fleet(self) -> Fleet:
        return Fleet(self.gpu.model, sum(p.nodes for p in self.gpu_pools), self.gpu.cards_per_node)

    def demands(self) -> list[Demand]:
        return [w.demand(self.gpu.model) for w in self.workloads]


class TeamSlot(_Model):
    """A team's reserved ports on the shared platform (the platform stack's `teams` registry)."""

    name: _string(_DNS_1035, f"a DNS-1035 label of at most {MAX_TENANT_NAME}", MAX_TENANT_NAME) = Field(
        description="the team's tenant name, as its team stack spells it"
    )
    api_port: Port = Field(description="the NodePort reserved for its API server")
    konnectivity_port: Port = Field(description="the NodePort reserved for its Konnectivity server")


@dataclass(frozen=True)
class StackConfig:
    """The validated whole, as load_stack_config assembles it."""

    project: str
    cluster: ClusterConfig
    tenants: tuple[TenantConfig, ...]
    hami: HamiConfig
    role: str = ROLE_LAB
    platform_stack: str | None = None
    teams: tuple[TeamSlot, ...] = ()
    # Not errors: said at `up` (e.g. a quota above what the fleet can hold).
    warnings: tuple[str, ...] = ()


# -- reading -----------------------------------------------------------------------------------
def _key(project: str, loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return f"{project}:{out}"


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model a location points into (for 'allowed keys' messages)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or getattr(annotation, "__metadata__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    origin = getattr(annotation, "__origin__", None)
    return _inner_model(origin) if origin not in (None, annotation) else None


def _problems(exc: ValidationError, cls: type[BaseModel], prefix: Sequence[str | int], project: str) -> list:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        if err["type"] == _ERROR:
            msg = err["ctx"]["msg"]
        elif err["type"] == "extra_forbidden":
            parent = _model_at(cls, loc[:-1])
            msg = f"unknown key; allowed: {', '.join(parent.keys())}" if parent else "unknown key"  # type: ignore[attr-defined]
        elif err["type"] == "missing":
            parent = _model_at(cls, loc[:-1])
            field = next(
                (f for n, f in (parent.model_fields if parent else {}).items() if (f.alias or n) == loc[-1]), None
            )
            msg = f"is required: {field.description}" if field and field.description else "is required"
        else:
            msg = f"{err['msg']}, got {err.get('input')!r}"
        out.append((_key(project, (*prefix, *loc)), msg))
    return out


def _read(cls: type[_Model], value: object, prefix: Sequence[str | int], project: str, problems: list) -> Any:
    """Validate one section; its problems are added, and None returned, when it is invalid."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        problems.append((_key(project, prefix), f"must be an object with keys {', '.join(cls.keys())}, got {value!r}"))
        return None
    try:
        return cls.model_validate(dict(value), by_alias=True, by_name=False)
    except ValidationError as exc:
        problems.extend(_problems(exc, cls, prefix, project))
        return None


class _Collector:
    def __init__(self, project: str):
        self.project = project
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []

    def fail(self, path: str, msg: str) -> None:
        self.problems.append((f"{self.project}:{path}", msg))


def _tenant_checks(t: TenantConfig, i: int, cluster: ClusterConfig | None, c: _Collector) -> None:
    """What spans the fields of one tenant: its cards, quota, networks, names and workloads."""
    path = f"tenants[{i}]"
    m = t.gpu.model
    fail = c.fail
    before = len(c.problems)
    mock_plugin = any(p.mode == POOL_DOCKER for p in t.gpu_pools)
    if mock_plugin and t.gpu.cards_per_node * m.memory_mb > MOCK_PLUGIN_MAX_MB_PER_NODE:
        fail(
            f"{path}.gpu.cardsPerNode",
            f"{t.gpu.cards_per_node} x {m.memory_mb} MB = {t.gpu.cards_per_node * m.memory_mb} MB per node is more "
            f"than the mock device plugin can advertise ({MOCK_PLUGIN_MAX_MB_PER_NODE} MB); use at most "
            f"{MOCK_PLUGIN_MAX_MB_PER_NODE // m.memory_mb} {m.key} cards per node, or put the cards on a kwok pool",
        )
    q = t.quota
    if q.gpumem_mb < m.memory_mb:
        fail(f"{path}.quota.gpumemMb", f"{q.gpumem_mb} MB is below one {m.key} card ({m.memory_mb} MB)")
    if q.gpucores < m.cores:
        fail(f"{path}.quota.gpucoresPercent", f"{q.gpucores} % is below one card ({m.cores} %)")
    pod_net = ipaddress.IPv4Network(t.pod_cidr)
    svc_net = ipaddress.IPv4Network(t.service_cidr)
    if svc_net.num_addresses < 16:
        fail(f"{path}.serviceCidr", f"{t.service_cidr} is too small: it must hold the DNS service IP (.10)")
    _pool_checks(t, path, fail)
    # kube-controller-manager gives every Node object a /24, simulated ones included.
    node_objects = sum(p.nodes for p in t.pools)
    node_nets = 2 ** max(0, NODE_POD_PREFIX - pod_net.prefixlen) if pod_net.prefixlen <= NODE_POD_PREFIX else 0
    if node_nets < node_objects:
        fail(
            f"{path}.podCidr",
            f"{t.pod_cidr} holds {node_nets} node network(s) (/{NODE_POD_PREFIX} each) for {node_objects} node(s); "
            f"use a /{NODE_POD_PREFIX - max(0, (node_objects - 1).bit_length())} or larger",
        )
    cluster_net = ipaddress.IPv4Network(cluster.subnet) if cluster else None
    for label, net in (("podCidr", pod_net), ("serviceCidr", svc_net)):
        if cluster_net is not None and net.overlaps(cluster_net):
            fail(f"{path}.{label}", f"{net} overlaps the Docker network {cluster_net}")
    if pod_net.overlaps(svc_net):
        fail(f"{path}.serviceCidr", f"{svc_net} overlaps podCidr {pod_net}")
    if cluster is not None:
        for j, pool in enumerate(t.pools):
            names = t.node_names(cluster.name, pool)
            if names and len(names[-1]) > HOSTNAME_MAX:
                fail(f"{path}.pools[{j}].name", f"node name {names[-1]!r} is longer than {HOSTNAME_MAX}; shorten it")
    _workload_checks(t, path, fail)
    if len(c.problems) != before:
        return  # totals against quota and fleet only mean something once the tenant is valid
    verdict = judge(t.demands(), q.quota, t.fleet)
    for problem in verdict.over_quota:
        fail(f"{path}.workloads", f"together ask for more than the tenant's quota: {problem}")
    if verdict.unplaceable and not verdict.over_quota:
        fail(
            f"{path}.workloads",
            f"{verdict.unplaceable} cannot be placed on the fleet ({t.fleet.describe()}); "
            "set failOnPending: false on a workload declared to stay Pending",
        )
    capacity = t.fleet.capacity
    for label, limit, cap in (
        ("gpus", q.gpus, capacity.gpus),
        ("gpumemMb", q.gpumem_mb, capacity.gpumem_mb),
        ("gpucoresPercent", q.gpucores, capacity.gpucores),
    ):
        if limit > cap:
            c.warnings.append(
                f"{path}.quota.{label}: {limit} is {limit - cap} above what the fleet holds ({cap}); "
                "the quota can never be used in full"
            )


def _pool_checks(t: TenantConfig, path: str, fail: Callable[[str, str], None]) -> None:
    """Pools: unique names, node counts per mode, a real node for the system pods, one kind of GPU."""
    seen: dict[str, int] = {}
    for j, pool in enumerate(t.pools):
        where = f"{path}.pools[{j}]"
        if pool.name in seen:
            fail(f"{where}.name", f"duplicate pool name {pool.name!r} (also pools[{seen[pool.name]}])")
        seen.setdefault(pool.name, j)
        limit = POOL_MAX_NODES.get(pool.mode)
        if limit is not None and pool.nodes > limit:
            fail(
                f"{where}.nodes",
                f"{'an' if pool.mode == POOL_EXTERNAL else 'a'} {pool.mode} pool holds at most {limit} nodes, "
                f"got {pool.nodes}",
            )
        if pool.join_token_hours is not None and pool.mode != POOL_EXTERNAL:
            fail(f"{where}.joinTokenHours", f"only external pools get a join token (this pool is {pool.mode})")
    if not t.pools:
        fail(f"{path}.pools", "needs at least one pool, with at least one docker node")
    elif not t.docker_nodes:
        fail(
            f"{path}.pools",
            "needs a docker pool: HAMi's scheduler, CoreDNS and the Konnectivity agent must really run, "
            "and simulated or not-yet-joined nodes cannot run them; add {name: worker, mode: docker, nodes: 1}",
        )
    elif t.docker_nodes > MAX_WORKERS:
        fail(f"{path}.pools", f"{t.docker_nodes} docker nodes in all; a tenant has at most {MAX_WORKERS}")
    if t.pools_of(POOL_EXTERNAL) and t.pools_of(POOL_KWOK):
        fail(
            f"{path}.pools",
            "mixes kwok (fake cards, HAMi's mock plugin) and external (real cards, NVIDIA's plugin) pools; "
            "one tenant's HAMi runs one device plugin: put them in two tenants",
        )


def _workload_checks(t: TenantConfig, path: str, fail: Callable[[str, str], None]) -> None:
    seen: set[tuple[str, str]] = set()
    m = t.gpu.model
    for j, w in enumerate(t.workloads):
        where = f"{path}.workloads[{j}]"
        if (w.namespace, w.name) in seen:
            fail(f"{where}.name", f"duplicate workload {w.namespace}/{w.name}")
        seen.add((w.namespace, w.name))
        if w.namespace in RESERVED_NAMESPACES:
            fail(f"{where}.namespace", f"{w.namespace!r} is reserved ({', '.join(RESERVED_NAMESPACES)}); use your own")
        if w.kind == "Pod" and w.replicas != 1:
            fail(f"{where}.replicas", "a Pod has exactly one replica; use kind Deployment for more")
        if w.card_type is not None and w.card_type.lower() not in m.hami_type.lower():
            fail(f"{where}.cardType", f"{w.card_type!r} matches no card of this tenant (its cards are {m.hami_type!r})")
        if not w.limits:
            fail(where, "asks for no GPU: give gpus, gpumemMb and/or gpucoresPercent")
            continue
        try:
            pod = w.pod(m)
        except RequestError as exc:
            fail(f"{where}.{_RESOURCE_KEYS.get(exc.resource, 'gpus')}", str(exc).split(": ", 1)[-1])
            continue
        if not pod.containers:
            fail(f"{where}.gpus", "0 GPUs: leave the workload out instead")
            continue
        for problem in pod_violations(pod, t.fleet):
            fail(where, problem)


def _tenants(project: str, raw: object, cluster: ClusterConfig | None, c: _Collector) -> list[TenantConfig]:
    if not isinstance(raw, list | tuple) or not raw:
        c.fail("tenants", "is required: a non-empty list of tenants")
        return []
    found: list[tuple[int, TenantConfig]] = []
    clean: list[tuple[int, TenantConfig]] = []  # valid on their own: their node names can be compared
    for i, item in enumerate(raw):
        if isinstance(item, Mapping) and not item:
            c.fail(f"tenants[{i}]", "is empty; a tenant needs at least a name, a gpu model and a quota")
            continue
        if isinstance(item, Mapping) and "workers" in item:
            c.fail(
                f"tenants[{i}].workers",
                "is replaced by pools: write pools: [{name: worker, mode: docker, nodes: "
                f"{item['workers']!r}}}] (the same nodes, names unchanged)",
            )
            item = {k: v for k, v in item.items() if k != "workers"}
        t = _read(TenantConfig, item, ("tenants", i), project, c.problems)
        if t is None:
            continue
        t = t.model_copy(
            update={
                "api_port": t.api_port if t.api_port is not None else 31443 + i,
                "konnectivity_port": t.konnectivity_port if t.konnectivity_port is not None else 31132 + i,
            }
        )
        before = len(c.problems)
        _tenant_checks(t, i, cluster, c)
        found.append((i, t))
        if len(c.problems) == before:
            clean.append((i, t))
    _unique(c, [(f"tenants[{i}]", t.name, t.api_port, t.konnectivity_port) for i, t in found], "tenant")
    if cluster is not None and len({t.name for _, t in found}) == len(found):
        owner: dict[str, str] = {}
        for i, t in clean:
            for j, pool in enumerate(t.pools):
                where = f"tenants[{i}].pools[{j}]"
                for node in t.node_names(cluster.name, pool):
                    if node in owner and owner[node] != where:
                        c.fail(f"{where}.name", f"node name {node!r} is also made by {owner[node]}; rename a pool")
                        break
                    owner[node] = where
    return [t for _, t in found]


def _unique(c: _Collector, entries: list[tuple[str, str, int | None, int | None]], what: str) -> None:
    """Names and ports (API and Konnectivity alike share one NodePort space) used once each."""
    names: dict[str, str] = {}
    ports: dict[int, str] = {}
    for path, name, api_port, konn_port in entries:
        if name in names:
            c.fail(f"{path}.name", f"duplicate {what} name {name!r} (also {names[name]})")
        names.setdefault(name, path)
        for label, port in (("apiPort", api_port), ("konnectivityPort", konn_port)):
            if port is None:
                continue
            if port in ports:
                c.fail(f"{path}.{label}", f"port {port} is already used by {ports[port]}")
            ports.setdefault(port, f"{path}.{label}")


def load_tenants(project: str, raw: object, cluster: Mapping[str, object] | None = None) -> list[TenantConfig]:
    """Tenants alone (the policy pack's view): the same model, defaults and checks."""
    c = _Collector(project)
    cl = _read(ClusterConfig, cluster, ("cluster",), project, c.problems)
    tenants = _tenants(project, raw, cl, c)
    if c.problems:
        raise ConfigError(c.problems)
    return tenants


def load_stack_config(
    project: str, raw: Mapping[str, object], kubeconfig_given: bool = False, management_token_given: bool = False
) -> StackConfig:
    """Validate the raw config objects (`cluster`, `tenants`, `hami`, `role`, ...) into a StackConfig.

    `kubeconfig_given` says whether the secret `kubeconfig` key is set (its value is not read
    here: it stays a secret Output).
    """
    c = _Collector(project)
    cluster = _read(ClusterConfig, raw.get("cluster"), ("cluster",), project, c.problems)
    if cluster is not None:
        net = ipaddress.IPv4Network(cluster.subnet)
        addr = ipaddress.IPv4Address(cluster.management_ip)
        if addr not in net or addr in (net.network_address, net.broadcast_address):
            c.fail("cluster.managementIp", f"must be a host address inside {cluster.subnet}, got {addr}")
        elif addr == net.network_address + 1:
            c.fail("cluster.managementIp", f"{addr} is the Docker network gateway; use another host address")
        if cluster.mode == MODE_KUBECONFIG and not kubeconfig_given:
            c.fail(
                "kubeconfig",
                "is required when cluster.mode is 'kubeconfig': "
                'pulumi config set --secret kubeconfig -- "$(cat kubeconfig.yaml)"',
            )
    hami = _read(HamiConfig, raw.get("hami"), ("hami",), project, c.problems)
    if hami is not None and hami.kube_burst < hami.kube_qps:
        c.fail("hami.kubeBurst", f"must be at least hami.kubeQps ({hami.kube_qps}), got {hami.kube_burst}")
    role = raw.get("role")
    role = ROLE_LAB if role is None else role
    if role not in ROLES:
        c.fail("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    platform_stack = raw.get("platformStack")
    if role == ROLE_TEAM and (not isinstance(platform_stack, str) or not _STACK_REF.match(platform_stack)):
        c.fail(
            "platformStack", f"a team stack needs its platform stack as <org>/<project>/<stack>, got {platform_stack!r}"
        )
    elif role in (ROLE_LAB, ROLE_PLATFORM) and platform_stack is not None:
        c.fail("platformStack", f"only a team stack reaches a platform stack (role is {role!r})")
    if role == ROLE_TEAM and not management_token_given:
        c.fail(
            MANAGEMENT_TOKEN_KEY,
            "a team stack reaches the management cluster with its team's own token, a secret: the platform "
            "owner sets it with scripts/grant-team.sh <team> (see the README, One stack per team)",
        )
    tenants: list[TenantConfig] = []
    raw_tenants = raw.get("tenants")
    if role == ROLE_PLATFORM:
        if raw_tenants:
            c.fail("tenants", "a platform stack has no tenants: each team stack creates its own")
    elif role in ROLES:
        tenants = _tenants(project, raw_tenants, cluster, c)
    teams = _teams(project, raw.get("teams"), role, c)
    if c.problems:
        raise ConfigError(c.problems)
    return StackConfig(
        project=project,
        cluster=cluster,
        tenants=tuple(tenants),
        hami=hami,
        role=role,
        platform_stack=platform_stack if role == ROLE_TEAM else None,
        teams=tuple(teams),
        warnings=tuple(c.warnings),
    )


def _teams(project: str, raw: object, role: str, c: _Collector) -> list[TeamSlot]:
    """The platform's registry of team names and ports: team stacks must match it."""
    if raw is None:
        return []
    if role != ROLE_PLATFORM:
        c.fail("teams", "only a platform stack keeps the team registry")
        return []
    if not isinstance(raw, list | tuple):
        c.fail("teams", "must be a list of {name, apiPort, konnectivityPort}")
        return []
    slots = [(i, _read(TeamSlot, t, ("teams", i), project, c.problems)) for i, t in enumerate(raw)]
    valid = [(i, s) for i, s in slots if s is not None]
    _unique(c, [(f"teams[{i}]", s.name, s.api_port, s.konnectivity_port) for i, s in valid], "team")
    return [s for _, s in valid]


def team_slot_problems(
    registry: Sequence[Mapping[str, object]], cluster_name: str, platform_lab: str, tenants: Sequence[TenantConfig]
) -> list[str]:
    """Why a team stack's tenants do not match the platform it joins (empty = they do).

    Checked when the platform's outputs arrive; two team stacks can then never take the same
    ports, names or Docker container names on the shared platform.
    """
    problems = []
    if cluster_name != platform_lab:
        problems.append(f"cluster.name is {cluster_name!r} but the platform's lab is {platform_lab!r}")
    slots = {str(t.get("name")): t for t in registry}
    for t in tenants:
        slot = slots.get(t.name)
        if slot is None:
            problems.append(f"tenant {t.name!r} is not in the platform's teams registry ({', '.join(sorted(slots))})")
        else:
            # Stack outputs arrive as protobuf numbers (floats): compare as integers.
            reserved = (int(slot.get("apiPort") or 0), int(slot.get("konnectivityPort") or 0))  # type: ignore[call-overload]
            if reserved != (t.api_port, t.konnectivity_port):
                problems.append(
                    f"tenant {t.name!r} uses ports {t.api_port}/{t.konnectivity_port} but the platform reserved "
                    f"{reserved[0]}/{reserved[1]} for it"
                )
    return problems


def tenants_schema() -> dict[str, Any]:
    """JSON Schema of a list of tenants (the policy pack's config), with every $ref inlined."""
    schema = TypeAdapter(list[TenantConfig]).json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)


# Keys read outside the sections (their checks are in load_stack_config).
TOP_LEVEL_KEYS = {
    "role": f"`{ROLE_LAB}` (default: everything), `{ROLE_PLATFORM}` (cluster + Kamaji) or `{ROLE_TEAM}` (one team)",
    "platformStack": "team stacks: the platform stack, `<org>/<project>/<stack>`",
    "kubeconfig": "secret: the adopted management cluster's kubeconfig, when cluster.mode is `kubeconfig`",
    MANAGEMENT_TOKEN_KEY: "team stacks, secret: the team's management-cluster token (`scripts/grant-team.sh`)",
}
SECTIONS: tuple[tuple[str, type[_Model]], ...] = (
    ("cluster", ClusterConfig),
    ("hami", HamiConfig),
    ("tenants[]", TenantConfig),
    ("teams[]", TeamSlot),
)


def reference_rows() -> list[tuple[str, str, str]]:
    """(key, default, meaning) for every key of the stack config, from the model itself."""
    from pydantic_core import PydanticUndefined

    rows = [(key, "-", text) for key, text in TOP_LEVEL_KEYS.items()]

    def walk(prefix: str, cls: type[_Model]) -> None:
        for name, f in cls.model_fields.items():
            key = f"{prefix}.{f.alias or name}"
            nested = _inner_model(f.annotation)
            if nested is not None:
                is_list = "tuple" in str(f.annotation) or "list" in str(f.annotation)
                walk(key + ("[]" if is_list else ""), nested)  # type: ignore[arg-type]
                continue
            if f.default is PydanticUndefined:
                default = "required"
            elif f.default in (None, ()):
                default = "-"
            elif isinstance(f.default, bool):
                default = f"`{str(f.default).lower()}`"
            else:
                default = f"`{f.default}`"
            rows.append((key, default, f.description or ""))

    for prefix, cls in SECTIONS:
        walk(prefix, cls)
    return rows
