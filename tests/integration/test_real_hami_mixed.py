"""The real-HAMi tier on a mixed fleet: an A100 pool and an L4 pool of simulated nodes, written by
the project's code (as SimulatedNodes does, each pool with its own cards) and kept Ready by KWOK.
HAMi's real scheduler and webhook place pods that choose card types; the project's rulebook
(`components.domain.rules`, what the config check and the pack run at preview) must say the same,
pod by pod: where each lands (which pool) or that it stays Pending with HAMi's code.
Skipped, saying why, without a HAMi scheduler binary (HAMI_SCHEDULER)."""

from __future__ import annotations

import threading

import pytest

from components.config.model import GpuFleet
from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.inventory import node_devices
from components.domain.requests import CardTypes, demand
from components.domain.rules import CARD_TYPE_MISMATCH, Fleet, NodeGroup, place_all
from components.kube import hami_reasons
from components.kube.client import core_api
from components.kube.waiting import wait_until
from components.lifecycle.simulated_nodes import ensure_nodes
from tests.support.cluster import start_cluster
from tests.support.kwok import start_kwok
from tests.support.real_hami import SKIP_REASON, RealHami, binary
from tests.support.tools import require

pytestmark = pytest.mark.integration
POOLS = {
    "a100": GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 1}),
    "l4": GpuFleet.model_validate({"model": "L4", "cardsPerNode": 2}),
}
NODES = {pool: [f"lab-team-a-{pool}-{i}" for i in range(2)] for pool in POOLS}
FLEET = Fleet(tuple(NodeGroup(g.model, len(NODES[p]), g.cards_per_node, p) for p, g in POOLS.items()))
# (pod, use-gputype, nouse-gputype, limits): the four, and the class around them
PODS = [
    ("use-l4", "L4", None, {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "10"}),
    ("nouse-l4", None, "L4", {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "10"}),
    ("big-no-type", None, None, {ha.RES_GPUMEM: "30000", ha.RES_GPUCORES: "10"}),
    ("h100", "H100", None, {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "10"}),
    ("list-with-space", "H100, l4", None, {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "10"}),
    ("big-on-l4", "L4", None, {ha.RES_GPUMEM: "30000", ha.RES_GPUCORES: "10"}),
    ("whole-card-percent", None, "A100", {ha.RES_GPUMEM_PERCENTAGE: "100", ha.RES_GPUCORES: "10"}),
]


@pytest.fixture(scope="module")
def mixed_lab(tools):
    path = binary()
    if path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "openssl", "kwok")
    cluster = start_cluster(tools)
    cluster.start_controller_manager(["nodelifecycle"])
    hami = RealHami(cluster, path).start()
    start_kwok(cluster)
    core = core_api(cluster.kubeconfig_text, connections=8)
    for pool, fleet in POOLS.items():
        ensure_nodes(core, NODES[pool], "team-a", pool, fleet)
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text))
    thread = threading.Thread(target=controller.run, daemon=True)
    expected = {n: [d.id for d in node_devices("team-a", n, POOLS[p])] for p in POOLS for n in NODES[p]}
    try:
        hami.wait_registered(expected, timeout=120)
        thread.start()
        assert controller.synced.wait(30)
        yield cluster
    finally:
        controller.stop()
        hami.stop()
        cluster.stop()


def _pod(name: str, use: str | None, nouse: str | None, limits: dict) -> dict:
    annotations = {k: v for k, v in ((ha.USE_GPU_TYPE, use), (ha.NOUSE_GPU_TYPE, nouse)) if v is not None}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
    }


def _listed(core, name: str) -> bool:
    return bool(core.list_namespaced_pod("default", field_selector=f"metadata.name={name}").items)


def _pool_of(node: str) -> str:
    return next(p for p, nodes in NODES.items() if node in nodes)


def test_hami_and_the_rulebook_agree_pod_by_pod_on_a_mixed_fleet(mixed_lab):
    core = mixed_lab.core()
    # what the project says at preview: each pod alone on the empty fleet
    said = {}
    for name, use, nouse, limits in PODS:
        d = demand(name, [("c", limits)], FLEET.models, CardTypes.of(use, nouse))
        placement = place_all([d], FLEET)
        if placement.placed:
            index = placement.placed[f"{name}[0]"]
            said[name] = [g.name for g in FLEET.groups for _ in range(g.nodes)][index]
        else:
            said[name] = "Pending: " + ", ".join(f"{c} x{n}" for c, n in sorted(placement.pending[0].reasons))
    # what HAMi does: one pod at a time, each removed before the next, so each meets the empty fleet
    did = {}
    for name, use, nouse, limits in PODS:
        core.create_namespaced_pod("default", _pod(name, use, nouse, limits))

        def settled(name: str = name) -> str | None:
            pod = core.read_namespaced_pod(name, "default")
            if pod.spec.node_name and (pod.metadata.annotations or {}).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS:
                return _pool_of(pod.spec.node_name)
            reason = hami_reasons.pending_reason(core, "default", name)
            if len(reason.by_node) < FLEET.nodes:  # HAMi's events name every node that refused it
                return None
            counts: dict[str, int] = {}
            for codes in reason.by_node.values():
                for code in codes:
                    counts[code] = counts.get(code, 0) + 1
            return "Pending: " + ", ".join(f"{c} x{n}" for c, n in sorted(counts.items()))

        did[name] = wait_until(settled, timeout=60, interval=0.5, what=f"HAMi to place or refuse {name}")
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        wait_until(lambda n=name: not _listed(core, n), timeout=30, what=f"{name} to go")
    assert did == said
    assert did["use-l4"] == "l4" and did["nouse-l4"] == "a100" and did["big-no-type"] == "a100"
    assert did["h100"] == f"Pending: {CARD_TYPE_MISMATCH} x4"
    assert did["big-on-l4"] == f"Pending: CardInsufficientMemory x2, {CARD_TYPE_MISMATCH} x2"


def test_the_live_picture_is_what_hami_allocated(mixed_lab, tmp_path):
    """Pods of both pools held at once; the picture drawn from the tenant (HAMi's annotations)
    puts each slice on a card of the pool HAMi chose, and its slices add up to HAMi's totals."""
    from components.reports.capacity_report import allocated_by_hami
    from components.reports.fleet_picture import live, render

    core = mixed_lab.core()
    pods = {
        "serve-0": ("L4", None),
        "serve-1": ("L4", None),
        "train-0": ("A100", None),
        "train-1": (None, "L4"),
    }
    for name, (use, nouse) in pods.items():
        core.create_namespaced_pod("default", _pod(name, use, nouse, {ha.RES_GPUMEM: "9000", ha.RES_GPUCORES: "20"}))

    def released() -> bool:
        listed = core.list_namespaced_pod("default").items
        return len(listed) == len(pods) and all(
            (p.metadata.annotations or {}).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS for p in listed
        )

    wait_until(released, timeout=90, what="HAMi to place and the controller to release every pod")
    picture = live("team-a", core)
    assert len(picture.cards) == FLEET.cards
    total = allocated_by_hami(core_api(mixed_lab.kubeconfig_text))
    assert (len(picture.slices), sum(s.mem_mb for s in picture.slices)) == (total.gpus, total.gpumem_mb) == (4, 36000)
    pools = {s.owner.split("/", 1)[1]: next(c.pool for c in picture.cards if c.key == s.card) for s in picture.slices}
    assert pools == {"serve-0": "l4", "serve-1": "l4", "train-0": "a100", "train-1": "a100"}
    svg, _ = render(picture, tmp_path)
    assert all(f'id="slice:{s.card}/{s.owner}"' in svg.read_text() for s in picture.slices)
    for name in pods:
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
