"""The real-HAMi tier on a kwok pool: simulated nodes written by the project's code (the same
as SimulatedNodes does) and kept Ready by KWOK; HAMi's real scheduler registers their fake
cards and places a GPU Deployment's pods on them; the release controller releases every pod;
KWOK makes them Running. Skipped, saying why, without a HAMi scheduler binary (HAMI_SCHEDULER)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from kubernetes import client

from components.config.model import GpuFleet
from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.inventory import node_devices
from components.kube.client import core_api
from components.lifecycle.simulated_nodes import ensure_nodes
from tests.support.cluster import start_cluster
from tests.support.kwok import start_kwok, wait_for
from tests.support.real_hami import SKIP_REASON, RealHami, binary
from tests.support.tools import require

pytestmark = pytest.mark.integration
FLEET = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 2})
NODES = [f"lab-team-a-sim-{i}" for i in range(4)]
REPLICAS = 12


@pytest.fixture(scope="module")
def kwok_lab(tools):
    path = binary()
    if path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "openssl", "kwok")
    cluster = start_cluster(tools)
    cluster.start_controller_manager(["nodelifecycle", "deployment", "replicaset"])
    hami = RealHami(cluster, path).start()
    start_kwok(cluster)
    ensure_nodes(core_api(cluster.kubeconfig_text, connections=8), NODES, "team-a", "sim", FLEET)
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text))
    thread = threading.Thread(target=controller.run, daemon=True)
    try:
        hami.wait_registered({n: [d.id for d in node_devices("team-a", n, FLEET)] for n in NODES}, timeout=120)
        thread.start()
        assert controller.synced.wait(30)
        yield cluster, controller
    finally:
        controller.stop()
        hami.stop()
        cluster.stop()


def test_hami_places_a_deployment_on_simulated_nodes_and_every_pod_is_released(kwok_lab):
    cluster, controller = kwok_lab
    core = cluster.core()
    apps = client.AppsV1Api(cluster.api_client())
    labels = {"app": "slices"}
    limits = {ha.RES_GPUMEM: "20000", ha.RES_GPUCORES: "30"}
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "slices"},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
                },
            },
        },
    )

    def running() -> list[client.V1Pod] | None:
        pods = core.list_namespaced_pod("default", label_selector="app=slices").items
        # KWOK may run a pod a moment before the controller has set its bind phase
        done = [
            p for p in pods if p.status.phase == "Running" and p.metadata.annotations.get(ha.BIND_PHASE) == "success"
        ]
        return pods if len(done) == REPLICAS else None

    pods = wait_for(running, 300, f"{REPLICAS} pods Running and released")
    cards: Counter[str] = Counter()
    for p in pods:
        notes = p.metadata.annotations
        assert p.spec.scheduler_name == ha.SCHEDULER_NAME  # HAMi's webhook, not the pod, chose it
        assert p.spec.node_name in NODES and notes[ha.BIND_PHASE] == ha.PHASE_SUCCESS
        for container in ha.decode_pod_devices(notes[ha.DEVICES_ALLOCATED]):
            for device in container:
                assert device.uuid.startswith(f"GPU-team-a-{p.spec.node_name}-")
                cards[device.uuid] += 1
    # 30 % each: HAMi never put more than three slices on one card.
    assert max(cards.values()) <= 3 and sum(cards.values()) == REPLICAS
    wait_for(
        lambda: not [n for n in NODES if ha.NODE_LOCK in (core.read_node(n).metadata.annotations or {})],
        30,
        "no node lock left",
    )
    value = controller.metrics.registry.get_sample_value
    freed = value("gpu_tenancy_locks_freed_at_allocation_total") or 0
    released = value("gpu_tenancy_releases_total", {"outcome": "released"}) or 0
    print(f"{REPLICAS} pods on {len({p.spec.node_name for p in pods})} simulated nodes, {len(cards)} cards")
    assert freed + released >= REPLICAS


FLEET8 = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 8})
FLEET_NODES = [f"lab-team-a-fleet-{i}" for i in range(50)]
FLEET_PODS = 300


def test_a_burst_on_a_fleet_is_bound_and_released_with_the_stacks_hami_values(tools):
    """300 pods of 20000 MB / 30 % at once on 50 simulated nodes x 8 A100, HAMi run with the
    stack's values (client rate, log level, node policy): every pod bound with bind-phase
    success, never more than three on a card, no lock left (bench/hami_fleet.py has the figures
    at 100 and 1,000 nodes)."""
    path = binary()
    if path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "openssl", "kwok")
    cluster = start_cluster(tools, ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"])
    try:
        cluster.start_controller_manager(["nodelifecycle"])
        hami = RealHami(cluster, path).start()
        start_kwok(cluster, "10.0.0.0/12")
        ensure_nodes(core_api(cluster.kubeconfig_text, connections=8), FLEET_NODES, "team-a", "fleet", FLEET8)
        hami.wait_registered({n: [d.id for d in node_devices("team-a", n, FLEET8)] for n in FLEET_NODES}, 180)
        controller = rc.ReleaseController(core_api(cluster.kubeconfig_text, connections=6))
        thread = threading.Thread(target=controller.run, daemon=True)
        thread.start()
        assert controller.synced.wait(30)
        core = cluster.core()
        limits = {ha.RES_GPUMEM: "20000", ha.RES_GPUCORES: "30"}
        start = time.monotonic()
        for i in range(FLEET_PODS):
            core.create_namespaced_pod(
                "default",
                {
                    "metadata": {"name": f"burst-{i}", "labels": {"app": "burst"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
                },
            )

        def released() -> list[client.V1Pod] | None:
            pods = core.list_namespaced_pod("default", label_selector="app=burst").items
            done = [p for p in pods if p.spec.node_name and p.metadata.annotations.get(ha.BIND_PHASE) == "success"]
            return done if len(done) == FLEET_PODS else None

        pods = wait_for(released, 600, f"{FLEET_PODS} pods bound and released", interval=1)
        took = time.monotonic() - start
        cards: Counter[str] = Counter()
        for p in pods:
            for container in ha.decode_pod_devices(p.metadata.annotations[ha.DEVICES_ALLOCATED]):
                for device in container:
                    cards[device.uuid] += 1
        print(f"{FLEET_PODS} pods on {len(FLEET_NODES)} nodes x 8 A100: {took:.0f} s, {FLEET_PODS / took:.1f} pods/s")
        assert max(cards.values()) <= 3 and sum(cards.values()) == FLEET_PODS
        wait_for(
            lambda: not [n for n in core.list_node().items if ha.NODE_LOCK in (n.metadata.annotations or {})],
            30,
            "no node lock left",
        )
        assert controller.healthy()
        controller.stop()
        thread.join(15)
    finally:
        cluster.stop()
