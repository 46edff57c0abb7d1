"""Typed stack config, validated in full before any resource is created.

`load_stack_config` turns the raw config objects into frozen dataclasses or raises one
ConfigError that lists every bad value by its full key (`gpu-tenancy:tenants[1].quota.gpumemMb`)
with what is allowed, so a platform engineer fixes the file once instead of once per run.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from components.config import versions
from components.gpu.catalog import GPU_MODELS, MOCK_PLUGIN_MAX_MB_PER_NODE, GpuModel
from components.gpu.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM
from components.gpu.rules import (
    GpuRequest,
    Quota,
    RequestError,
    first_unplaceable,
    parse_request,
    quota_violations,
    single_card_violations,
    total_usage,
)

NODE_PORT_RANGE = range(30000, 32768)
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
WORKLOAD_KINDS = ("Pod", "Deployment")
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")
MAX_TENANT_NAME = 30
MAX_WORKERS = 10
MAX_CARDS_PER_NODE = 8

MODE_DOCKER = "docker"
MODE_KUBECONFIG = "kubeconfig"

# What a stack builds: the whole lab; the shared platform (cluster + Kamaji) only; or one team's
# tenants on a platform stack it reaches through a StackReference.
ROLE_LAB = "lab"
ROLE_PLATFORM = "platform"
ROLE_TEAM = "team"
ROLES = (ROLE_LAB, ROLE_PLATFORM, ROLE_TEAM)
_STACK_REF = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class ConfigError(ValueError):
    """Every problem found in the stack config, each naming its key."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = "\n".join(f"  {key}: {msg}" for key, msg in problems)
        super().__init__(f"invalid stack config ({len(problems)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class ClusterConfig:
    """The management cluster: a k3s container on a Docker network, or an adopted kubeconfig."""

    mode: str
    name: str
    subnet: str
    management_ip: str


@dataclass(frozen=True)
class GpuFleet:
    model: GpuModel
    cards_per_node: int


@dataclass(frozen=True)
class WorkloadConfig:
    """A GPU workload a tenant's stack declares (created in the tenant, released by BindRelease)."""

    name: str
    kind: str
    image: str
    replicas: int
    request: GpuRequest
    limits: tuple[tuple[str, int], ...]
    namespace: str = "default"
    command: tuple[str, ...] = ()
    card_type: str | None = None
    wait_seconds: int = 120
    fail_on_pending: bool = True


@dataclass(frozen=True)
class TenantConfig:
    name: str
    kubernetes_version: str
    workers: int
    gpu: GpuFleet
    quota: Quota
    api_port: int
    konnectivity_port: int
    pod_cidr: str
    service_cidr: str
    workloads: tuple[WorkloadConfig, ...] = ()

    @property
    def worker_image(self) -> str:
        return versions.KIND_NODE_IMAGES[self.kubernetes_version]

    @property
    def dns_service_ip(self) -> str:
        return str(ipaddress.IPv4Network(self.service_cidr)[10])


@dataclass(frozen=True)
class HamiConfig:
    # Passed as the scheduler's --node-lock-timeout flag, the only setting that takes effect.
    node_lock_timeout: str = "5m"


@dataclass(frozen=True)
class TeamSlot:
    """A team's reserved ports on the shared platform (the platform stack's `teams` registry)."""

    name: str
    api_port: int
    konnectivity_port: int


@dataclass(frozen=True)
class StackConfig:
    project: str
    cluster: ClusterConfig
    tenants: tuple[TenantConfig, ...]
    hami: HamiConfig = field(default_factory=HamiConfig)
    role: str = ROLE_LAB
    platform_stack: str | None = None
    teams: tuple[TeamSlot, ...] = ()


class _Reader:
    """Collects problems while reading nested config with full key paths."""

    def __init__(self, project: str):
        self.project = project
        self.problems: list[tuple[str, str]] = []

    def key(self, path: str) -> str:
        return f"{self.project}:{path}"

    def fail(self, path: str, msg: str) -> None:
        self.problems.append((self.key(path), msg))

    def obj(self, value: object, path: str, allowed: Sequence[str]) -> Mapping[str, object]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"must be an object with keys {', '.join(allowed)}")
            return {}
        for k in value:
            if k not in allowed:
                self.fail(f"{path}.{k}", f"unknown key; allowed: {', '.join(allowed)}")
        return value

    def integer(
        self, m: Mapping[str, object], k: str, path: str, lo: int, hi: int, unit: str = "", default: int | None = None
    ) -> int:
        value = m.get(k, default)
        where = f"{path}.{k}"
        if value is None:
            self.fail(where, f"is required: an integer {lo}-{hi}{unit}")
            return lo
        if isinstance(value, bool) or not isinstance(value, int):
            hint = ""
            if isinstance(value, str) and re.fullmatch(r"\s*[0-9.]+\s*[KMGT]i?[Bb]?\s*", value):
                hint = " (units are not accepted: give plain MB, e.g. 10240 for 10Gi)"
            self.fail(where, f"must be an integer {lo}-{hi}{unit}, got {value!r}{hint}")
            return lo
        if not lo <= value <= hi:
            self.fail(where, f"must be {lo}-{hi}{unit}, got {value}")
        return value

    def string(self, m: Mapping[str, object], k: str, path: str, default: str | None = None) -> str:
        value = m.get(k, default)
        if not isinstance(value, str) or not value:
            self.fail(f"{path}.{k}", f"is required: a non-empty string, got {value!r}")
            return ""
        return value


def _cidr(r: _Reader, value: str, path: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(value)
    except ValueError:
        r.fail(path, f"must be an IPv4 network like 10.244.0.0/16, got {value!r}")
        return None


def _cluster(r: _Reader, raw: object) -> ClusterConfig:
    m = r.obj(raw, "cluster", ("mode", "name", "subnet", "managementIp"))
    mode = r.string(m, "mode", "cluster", MODE_DOCKER)
    if mode not in (MODE_DOCKER, MODE_KUBECONFIG):
        r.fail("cluster.mode", f"must be '{MODE_DOCKER}' or '{MODE_KUBECONFIG}', got {mode!r}")
    name = r.string(m, "name", "cluster", "gpu-lab")
    if name and not _DNS_1035.match(name):
        r.fail("cluster.name", f"must be a DNS label (lower case, digits, '-'), got {name!r}")
    subnet = r.string(m, "subnet", "cluster", "172.30.0.0/24")
    ip = r.string(m, "managementIp", "cluster", "172.30.0.2")
    net = _cidr(r, subnet, "cluster.subnet")
    try:
        addr = ipaddress.IPv4Address(ip)
        if net is not None and (addr not in net or addr in (net.network_address, net.broadcast_address)):
            r.fail("cluster.managementIp", f"must be a host address inside {subnet}, got {ip}")
        elif net is not None and addr == net.network_address + 1:
            r.fail("cluster.managementIp", f"{ip} is the Docker network gateway; use another host address")
    except ValueError:
        r.fail("cluster.managementIp", f"must be an IPv4 address, got {ip!r}")
    return ClusterConfig(mode=mode, name=name, subnet=subnet, management_ip=ip)


_TENANT_KEYS = (
    "name",
    "kubernetesVersion",
    "workers",
    "gpu",
    "quota",
    "apiPort",
    "konnectivityPort",
    "podCidr",
    "serviceCidr",
    "workloads",
)
_WORKLOAD_KEYS = (
    "name",
    "kind",
    "image",
    "command",
    "replicas",
    "namespace",
    "gpus",
    "gpumemMb",
    "gpucoresPercent",
    "cardType",
    "waitSeconds",
    "failOnPending",
)
_RESOURCE_KEYS = {RES_GPU: "gpus", RES_GPUMEM: "gpumemMb", RES_GPUCORES: "gpucoresPercent"}


def _workload(r: _Reader, raw: object, path: str, model: GpuModel, cards: int) -> WorkloadConfig | None:
    m = r.obj(raw, path, _WORKLOAD_KEYS)
    if not m:
        r.fail(path, "is empty; a workload needs at least a name and an image")
        return None
    name = r.string(m, "name", path)
    if name and (not _DNS_1123.match(name) or len(name) > 50):
        r.fail(f"{path}.name", f"must be a DNS label of at most 50 characters, got {name!r}")
    kind = r.string(m, "kind", path, "Pod")
    if kind not in WORKLOAD_KINDS:
        r.fail(f"{path}.kind", f"must be one of {', '.join(WORKLOAD_KINDS)}, got {kind!r}")
    image = r.string(m, "image", path)
    namespace = r.string(m, "namespace", path, "default")
    if namespace and not _DNS_1123.match(namespace):
        r.fail(f"{path}.namespace", f"must be a DNS label, got {namespace!r}")
    replicas = r.integer(m, "replicas", path, 1, 100, default=1)
    if kind == "Pod" and replicas != 1:
        r.fail(f"{path}.replicas", "a Pod has exactly one replica; use kind Deployment for more")
    command = m.get("command", [])
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        r.fail(f"{path}.command", f"must be a list of strings, got {command!r}")
        command = []
    card_type = m.get("cardType")
    if card_type is not None and (not isinstance(card_type, str) or card_type.lower() not in model.hami_type.lower()):
        r.fail(f"{path}.cardType", f"{card_type!r} matches no card of this tenant (its cards are {model.hami_type!r})")
    wait = r.integer(m, "waitSeconds", path, 5, 3600, " s", default=120)
    fail_on_pending = m.get("failOnPending", True)
    if not isinstance(fail_on_pending, bool):
        r.fail(f"{path}.failOnPending", f"must be true or false, got {fail_on_pending!r}")
        fail_on_pending = True
    limits = {res: m[key] for res, key in _RESOURCE_KEYS.items() if key in m}
    if not limits:
        r.fail(path, "asks for no GPU: give gpus, gpumemMb and/or gpucoresPercent")
        return None
    try:
        request = parse_request(limits, model)
    except RequestError as exc:
        r.fail(f"{path}.{_RESOURCE_KEYS[str(exc).split()[0]]}", str(exc))
        return None
    if request is None:
        r.fail(f"{path}.gpus", "0 GPUs: leave the workload out instead")
        return None
    for problem in single_card_violations(request, model, cards):
        r.fail(path, problem)
    return WorkloadConfig(
        name=name,
        kind=kind,
        image=image,
        replicas=replicas,
        request=request,
        limits=tuple((res, int(v)) for res, v in limits.items()),
        namespace=namespace,
        command=tuple(command),
        card_type=card_type,
        wait_seconds=wait,
        fail_on_pending=fail_on_pending,
    )


def _workloads(
    r: _Reader, raw: object, path: str, model: GpuModel, cards: int, workers: int, quota: Quota | None
) -> tuple[WorkloadConfig, ...]:
    """Each workload on its own, then all of them against the quota and the fleet."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.fail(f"{path}.workloads", "must be a list of workloads")
        return ()
    found: list[WorkloadConfig] = []
    before = len(r.problems)
    for j, w in enumerate(raw):
        wl = _workload(r, w, f"{path}.workloads[{j}]", model, cards)
        if wl is not None:
            if any(o.name == wl.name and o.namespace == wl.namespace for o in found):
                r.fail(f"{path}.workloads[{j}].name", f"duplicate workload {wl.namespace}/{wl.name}")
            found.append(wl)
    if len(r.problems) > before or quota is None:
        return tuple(found)
    usage = total_usage((w.request, w.replicas) for w in found)
    over = quota_violations(usage, quota)
    for problem in over:
        r.fail(f"{path}.workloads", f"together ask for more than the tenant's quota: {problem}")
    if over:
        return tuple(found)
    meant = [w for w in found if w.fail_on_pending]
    pods = [(f"{w.name}[{k}]", w.request) for w in meant for k in range(w.replicas)]
    unplaced = first_unplaceable(pods, workers, cards, model)
    if unplaced is not None:
        r.fail(
            f"{path}.workloads",
            f"{unplaced} cannot be placed on the fleet ({workers} node(s) x {cards} {model.key}); "
            "set failOnPending: false on a workload declared to stay Pending",
        )
    return tuple(found)


def _tenant(r: _Reader, raw: object, i: int, cluster_net: ipaddress.IPv4Network | None) -> TenantConfig | None:
    path = f"tenants[{i}]"
    start = len(r.problems)
    m = r.obj(raw, path, _TENANT_KEYS)
    if not m:
        if raw is not None and isinstance(raw, Mapping):
            r.fail(path, "is empty; a tenant needs at least a name and a gpu model")
        elif raw is None:
            r.fail(path, "is empty")
        return None
    name = r.string(m, "name", path)
    if name and (not _DNS_1035.match(name) or len(name) > MAX_TENANT_NAME):
        r.fail(
            f"{path}.name",
            f"must be a DNS-1035 label (a-z first, then a-z0-9-, at most {MAX_TENANT_NAME}), got {name!r}",
        )
    version = r.string(m, "kubernetesVersion", path, versions.DEFAULT_TENANT_VERSION)
    if version and version not in versions.KIND_NODE_IMAGES:
        r.fail(
            f"{path}.kubernetesVersion",
            f"no worker image is pinned for {version}; pinned: {', '.join(versions.KIND_NODE_IMAGES)}",
        )
    workers = r.integer(m, "workers", path, 1, MAX_WORKERS, default=1)

    g = r.obj(m.get("gpu"), f"{path}.gpu", ("model", "cardsPerNode"))
    model_key = r.string(g, "model", f"{path}.gpu")
    model = GPU_MODELS.get(model_key)
    if model_key and model is None:
        r.fail(f"{path}.gpu.model", f"unknown GPU model {model_key!r}; allowed: {', '.join(sorted(GPU_MODELS))}")
    cards = r.integer(g, "cardsPerNode", f"{path}.gpu", 1, MAX_CARDS_PER_NODE, default=1)
    if model is not None and cards * model.memory_mb > MOCK_PLUGIN_MAX_MB_PER_NODE:
        r.fail(
            f"{path}.gpu.cardsPerNode",
            f"{cards} x {model.memory_mb} MB = {cards * model.memory_mb} MB per node is more than the mock "
            f"device plugin can advertise ({MOCK_PLUGIN_MAX_MB_PER_NODE} MB); use at most "
            f"{MOCK_PLUGIN_MAX_MB_PER_NODE // model.memory_mb} {model.key} cards per node",
        )

    q = r.obj(m.get("quota"), f"{path}.quota", ("gpus", "gpumemMb", "gpucoresPercent"))
    big = 10**9
    quota = Quota(
        gpus=r.integer(q, "gpus", f"{path}.quota", 1, big, " vGPUs"),
        gpumem_mb=r.integer(q, "gpumemMb", f"{path}.quota", 1, big, " MB"),
        gpucores=r.integer(q, "gpucoresPercent", f"{path}.quota", 1, big, " %"),
    )
    if model is not None and q:
        if "gpumemMb" in q and isinstance(q["gpumemMb"], int) and 0 < quota.gpumem_mb < model.memory_mb:
            r.fail(
                f"{path}.quota.gpumemMb", f"{quota.gpumem_mb} MB is below one {model.key} card ({model.memory_mb} MB)"
            )
        if "gpucoresPercent" in q and isinstance(q["gpucoresPercent"], int) and 0 < quota.gpucores < model.cores:
            r.fail(f"{path}.quota.gpucoresPercent", f"{quota.gpucores} % is below one card ({model.cores} %)")

    api_port = r.integer(
        m,
        "apiPort",
        path,
        NODE_PORT_RANGE.start,
        NODE_PORT_RANGE.stop - 1,
        " (the management cluster's NodePort range)",
        default=31443 + i,
    )
    konn_port = r.integer(
        m,
        "konnectivityPort",
        path,
        NODE_PORT_RANGE.start,
        NODE_PORT_RANGE.stop - 1,
        " (the management cluster's NodePort range)",
        default=31132 + i,
    )
    pod_cidr = r.string(m, "podCidr", path, "10.244.0.0/16")
    service_cidr = r.string(m, "serviceCidr", path, "10.96.0.0/16")
    pod_net = _cidr(r, pod_cidr, f"{path}.podCidr")
    svc_net = _cidr(r, service_cidr, f"{path}.serviceCidr")
    if svc_net is not None and svc_net.num_addresses < 16:
        r.fail(f"{path}.serviceCidr", f"{service_cidr} is too small: it must hold the DNS service IP (.10)")
    for label, net in (("podCidr", pod_net), ("serviceCidr", svc_net)):
        if net is not None and cluster_net is not None and net.overlaps(cluster_net):
            r.fail(f"{path}.{label}", f"{net} overlaps the Docker network {cluster_net}")
    if pod_net is not None and svc_net is not None and pod_net.overlaps(svc_net):
        r.fail(f"{path}.serviceCidr", f"{svc_net} overlaps podCidr {pod_net}")
    if model is None:
        return None
    # Totals against quota and fleet only mean something once the tenant's own values are valid.
    totals = len(r.problems) == start
    workloads = _workloads(r, m.get("workloads"), path, model, cards, workers, quota if totals else None)
    return TenantConfig(
        workloads=workloads,
        name=name,
        kubernetes_version=version,
        workers=workers,
        gpu=GpuFleet(model=model, cards_per_node=cards),
        quota=quota,
        api_port=api_port,
        konnectivity_port=konn_port,
        pod_cidr=pod_cidr,
        service_cidr=service_cidr,
    )


def load_stack_config(project: str, raw: Mapping[str, object], kubeconfig_given: bool = False) -> StackConfig:
    """Validate the raw config objects (`cluster`, `tenants`, `hami`) into a StackConfig.

    `kubeconfig_given` says whether the secret `kubeconfig` key is set (its value is not read
    here: it stays a secret Output).
    """
    r = _Reader(project)
    cluster = _cluster(r, raw.get("cluster"))
    if cluster.mode == MODE_KUBECONFIG and not kubeconfig_given:
        r.fail(
            "kubeconfig",
            "is required when cluster.mode is 'kubeconfig': "
            'pulumi config set --secret kubeconfig -- "$(cat kubeconfig.yaml)"',
        )
    cluster_net = None
    try:
        cluster_net = ipaddress.IPv4Network(cluster.subnet)
    except ValueError:
        pass

    h = r.obj(raw.get("hami"), "hami", ("nodeLockTimeout",))
    lock_timeout = r.string(h, "nodeLockTimeout", "hami", HamiConfig.node_lock_timeout)
    if lock_timeout and not _DURATION.match(lock_timeout):
        r.fail("hami.nodeLockTimeout", f"must be a Go duration like 30s or 5m, got {lock_timeout!r}")

    role = raw.get("role") or ROLE_LAB
    if role not in ROLES:
        r.fail("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    platform_stack = raw.get("platformStack")
    if role == ROLE_TEAM and (not isinstance(platform_stack, str) or not _STACK_REF.match(platform_stack)):
        r.fail(
            "platformStack", f"a team stack needs its platform stack as <org>/<project>/<stack>, got {platform_stack!r}"
        )
    elif role in (ROLE_LAB, ROLE_PLATFORM) and platform_stack is not None:
        r.fail("platformStack", f"only a team stack reaches a platform stack (role is {role!r})")

    raw_tenants = raw.get("tenants")
    indexed: list[tuple[int, TenantConfig]] = []
    if role == ROLE_PLATFORM:
        if raw_tenants:
            r.fail("tenants", "a platform stack has no tenants: each team stack creates its own")
    elif not isinstance(raw_tenants, Sequence) or isinstance(raw_tenants, str | bytes) or not raw_tenants:
        r.fail("tenants", "is required: a non-empty list of tenants")
    else:
        for i, t in enumerate(raw_tenants):
            tenant = _tenant(r, t, i, cluster_net)
            if tenant is not None:
                indexed.append((i, tenant))
        _unique(r, [(f"tenants[{i}]", t.name, t.api_port, t.konnectivity_port) for i, t in indexed], "tenant")
    teams = _teams(r, raw.get("teams"), role)
    if r.problems:
        raise ConfigError(r.problems)
    return StackConfig(
        project=project,
        cluster=cluster,
        tenants=tuple(t for _, t in indexed),
        hami=HamiConfig(node_lock_timeout=lock_timeout),
        role=role,
        platform_stack=platform_stack if role == ROLE_TEAM else None,
        teams=teams,
    )


def _unique(r: _Reader, entries: list[tuple[str, str, int, int]], what: str) -> None:
    """Names and ports (API and Konnectivity alike share one NodePort space) used once each."""
    names: dict[str, str] = {}
    ports: dict[int, str] = {}
    for path, name, api_port, konn_port in entries:
        if name in names:
            r.fail(f"{path}.name", f"duplicate {what} name {name!r} (also {names[name]})")
        names.setdefault(name, path)
        for label, port in (("apiPort", api_port), ("konnectivityPort", konn_port)):
            if port in ports:
                r.fail(f"{path}.{label}", f"port {port} is already used by {ports[port]}")
            ports.setdefault(port, f"{path}.{label}")


def _teams(r: _Reader, raw: object, role: str) -> tuple[TeamSlot, ...]:
    """The platform's registry of team names and ports: team stacks must match it."""
    if raw is None:
        return ()
    if role != ROLE_PLATFORM:
        r.fail("teams", "only a platform stack keeps the team registry")
        return ()
    if not isinstance(raw, list):
        r.fail("teams", "must be a list of {name, apiPort, konnectivityPort}")
        return ()
    slots = []
    for i, t in enumerate(raw):
        m = r.obj(t, f"teams[{i}]", ("name", "apiPort", "konnectivityPort"))
        name = r.string(m, "name", f"teams[{i}]")
        if name and (not _DNS_1035.match(name) or len(name) > MAX_TENANT_NAME):
            r.fail(f"teams[{i}].name", f"must be a DNS-1035 label of at most {MAX_TENANT_NAME}, got {name!r}")
        lo, hi = NODE_PORT_RANGE.start, NODE_PORT_RANGE.stop - 1
        slots.append(
            TeamSlot(
                name,
                r.integer(m, "apiPort", f"teams[{i}]", lo, hi),
                r.integer(m, "konnectivityPort", f"teams[{i}]", lo, hi),
            )
        )
    _unique(r, [(f"teams[{i}]", s.name, s.api_port, s.konnectivity_port) for i, s in enumerate(slots)], "team")
    return tuple(slots)


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
