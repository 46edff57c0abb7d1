"""Checks that span fields of the stack config (cards, quota, networks, names, pools,
workloads and their fit, through the rulebook), each naming the key to fix.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from components.config.model import (
    _RESOURCE_KEYS,
    HOSTNAME_MAX,
    MAX_WORKERS,
    NODE_POD_PREFIX,
    POOL_DOCKER,
    POOL_EXTERNAL,
    POOL_KWOK,
    POOL_MAX_NODES,
    ClusterConfig,
    TenantConfig,
    WorkloadConfig,
)
from components.config.problems import Collector
from components.domain.catalog import MOCK_PLUGIN_MAX_MB_PER_NODE
from components.domain.names import RESERVED_NAMESPACES
from components.domain.requests import RequestError
from components.domain.rollouts import RECREATE
from components.domain.rules import judge, pod_violations

# kube-apiserver refuses a --service-cluster-ip-range with more than 20 host bits (IPv4).
SERVICE_CIDR_MIN_PREFIX = 12


def tenant_checks(t: TenantConfig, i: int, cluster: ClusterConfig | None, c: Collector) -> None:
    """What spans the fields of one tenant: its cards, quota, networks, names and workloads."""
    path = f"tenants[{i}]"
    fail = c.fail
    before = len(c.problems)
    gpu_pools = set(t.gpu_pools)
    for j, pool in enumerate(t.pools):
        g, key = t.pool_gpu(pool), f"{path}.pools[{j}].gpu" if pool.gpu else f"{path}.gpu"
        if pool.gpu and pool not in gpu_pools:
            fail(
                key,
                f"this {pool.mode} pool's nodes carry no cards: beside kwok or external pools, docker workers run the "
                "system pods; give the cards to a kwok or external pool",
            )
        m = g.model
        if (
            pool in gpu_pools
            and pool.mode == POOL_DOCKER
            and g.cards_per_node * m.memory_mb > MOCK_PLUGIN_MAX_MB_PER_NODE
        ):
            fail(
                f"{key}.cardsPerNode",
                f"{g.cards_per_node} x {m.memory_mb} MB = {g.cards_per_node * m.memory_mb} MB per node is more "
                f"than the mock device plugin can advertise ({MOCK_PLUGIN_MAX_MB_PER_NODE} MB); use at most "
                f"{MOCK_PLUGIN_MAX_MB_PER_NODE // m.memory_mb} {m.key} cards per node, or put the cards on a kwok pool",
            )
    q = t.quota
    smallest = min((t.pool_gpu(p).model for p in t.gpu_pools), key=lambda m: m.memory_mb, default=t.gpu.model)
    if q.gpumem_mb < smallest.memory_mb:
        fail(f"{path}.quota.gpumemMb", f"{q.gpumem_mb} MB is below one {smallest.key} card ({smallest.memory_mb} MB)")
    if q.gpucores < smallest.cores:
        fail(f"{path}.quota.gpucoresPercent", f"{q.gpucores} % is below one card ({smallest.cores} %)")
    pod_net = ipaddress.IPv4Network(t.pod_cidr)
    svc_net = ipaddress.IPv4Network(t.service_cidr)
    if svc_net.num_addresses < 16:
        fail(f"{path}.serviceCidr", f"{t.service_cidr} is too small: it must hold the DNS service IP (.10)")
    elif svc_net.prefixlen < SERVICE_CIDR_MIN_PREFIX:
        fail(
            f"{path}.serviceCidr",
            f"{t.service_cidr} is too large: kube-apiserver takes a service range of at most "
            f"/{SERVICE_CIDR_MIN_PREFIX} (2^{32 - SERVICE_CIDR_MIN_PREFIX} addresses); use e.g. 10.96.0.0/16",
        )
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
    demands = t.demands()
    verdict = judge(demands, q.quota, t.fleet)
    surging = [f"{d.name} {d.counted}" for d in demands if d.surge]
    peak = ""
    if surging:
        peak = f" (counted at their rollout's peak: {', '.join(surging)}; rollout.maxSurge 0 needs no room)"
    for problem in verdict.over_quota:
        fail(f"{path}.workloads", f"together ask for more than the tenant's quota: {problem}{peak}")
    if verdict.unplaceable and not verdict.over_quota:
        fail(
            f"{path}.workloads",
            f"{verdict.unplaceable} cannot be placed on the fleet ({t.fleet.describe()}){peak}; "
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
        fail(f"{path}.pools", "needs at least one pool: a docker pool, or an external pool of the team's machines")
    elif not t.docker_nodes and not t.pools_of(POOL_EXTERNAL):
        fail(
            f"{path}.pools",
            "needs a docker or an external pool: HAMi's scheduler, CoreDNS and the Konnectivity agent must really "
            "run, and simulated nodes cannot run them; add {name: worker, mode: docker, nodes: 1}",
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
    fleet = t.fleet
    for j, w in enumerate(t.workloads):
        where = f"{path}.workloads[{j}]"
        if (w.namespace, w.name) in seen:
            fail(f"{where}.name", f"duplicate workload {w.namespace}/{w.name}")
        seen.add((w.namespace, w.name))
        if w.namespace in RESERVED_NAMESPACES:
            fail(f"{where}.namespace", f"{w.namespace!r} is reserved ({', '.join(RESERVED_NAMESPACES)}); use your own")
        if w.kind == "Pod" and w.replicas != 1:
            fail(f"{where}.replicas", "a Pod has exactly one replica; use kind Deployment for more")
        _rollout_checks(w, f"{where}.rollout", fail)
        if fleet.groups and not any(w.types.allows(m) for m in fleet.models):
            key = "cardType" if w.card_type is not None else "avoidCardType"
            kinds = ", ".join(repr(m.hami_type) for m in fleet.models)
            fail(f"{where}.{key}", f"{w.types} matches no card of this tenant (its cards are {kinds})")
            continue
        if not w.limits:
            fail(where, "asks for no GPU: give gpus, gpumemMb and/or gpucoresPercent")
            continue
        try:
            d = w.demand(fleet.models or (t.gpu.model,))
        except RequestError as exc:
            fail(f"{where}.{_RESOURCE_KEYS.get(exc.resource, 'gpus')}", str(exc).split(": ", 1)[-1])
            continue
        if not d.pod.containers:
            fail(f"{where}.gpus", "0 GPUs: leave the workload out instead")
            continue
        for problem in pod_violations(d, fleet) if fleet.groups else ():  # no pool: said at pools
            fail(where, problem)


def _rollout_checks(w: WorkloadConfig, where: str, fail: Callable[[str, str], None]) -> None:
    """What the API server would refuse at apply, said at the key first."""
    r, given = w.rollout, w.rollout.model_fields_set
    if w.kind == "Pod" and "rollout" in w.model_fields_set:
        fail(where, "a Pod has no rollout (it is replaced whole); use kind Deployment")
    elif r.strategy == RECREATE and given & {"max_surge", "max_unavailable"}:
        key = "maxSurge" if "max_surge" in given else "maxUnavailable"
        fail(f"{where}.{key}", "applies to RollingUpdate only; Recreate stops every pod, then starts the new ones")
    elif r.strategy != RECREATE and r.max_surge == 0 and r.max_unavailable == 0:
        fail(f"{where}.maxUnavailable", "maxSurge and maxUnavailable cannot both be 0: the rollout could never start")


def unique(c: Collector, entries: list[tuple[str, str, int | None, int | None]], what: str) -> None:
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
