"""The real-HAMi tier: HAMi's own scheduler (extender + webhook) decides, kube-scheduler binds,
this project's inventory, registration gate, release controller and reason reader do the rest.
Skipped, saying why, without a HAMi scheduler binary (HAMI_SCHEDULER)."""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import suppress

import pytest
from kubernetes import client

from components.config.model import GpuFleet
from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.requests import Quota
from components.kube import hami_reasons
from components.kube.client import core_api
from components.kube.waiting import TimedOut, wait_until
from components.tenant.gpu_quota import quota_hard
from tests.support.cluster import start_cluster
from tests.support.gpu_pods import create_gpu_pod
from tests.support.real_hami import SKIP_REASON, RealHami, add_gpu_node, binary
from tests.support.tools import require

pytestmark = pytest.mark.integration
NODE = "team-a-worker-0"
A100 = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 1})
A100_MB = A100.model.memory_mb


@pytest.fixture(scope="module")
def lab(tools):
    path = binary()
    if path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "kube-scheduler", "etcd", "openssl")
    cluster = start_cluster(tools)
    hami = RealHami(cluster, path).start()
    cards = add_gpu_node(cluster, "team-a", NODE, A100)
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text))
    thread = threading.Thread(target=controller.run, daemon=True)
    try:
        # the project's gate: HAMi lists the node's cards in its metrics (service proxy)
        hami.wait_registered({NODE: cards})
        thread.start()
        assert controller.synced.wait(30)
        yield cluster, hami, controller
    finally:
        controller.stop()
        hami.stop()
        cluster.stop()


@pytest.fixture
def ns(lab):
    cluster, _, _ = lab
    name = f"real-{uuid.uuid4().hex[:6]}"
    core = cluster.core()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    for pod in core.list_namespaced_pod(name).items:  # no kubelet: pods go at once, freeing HAMi's cards
        core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=0)


def gpu_pod(core, ns: str, name: str, mem: int, cores: int) -> None:
    """Created with the plain API client, as a team's kubectl would: nothing of the stack's."""
    create_gpu_pod(core, ns, name, mem, cores)


def wait_bound(core, ns: str, name: str, timeout: float = 120) -> client.V1Pod:
    def released() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, ns)
        bound = pod.spec.node_name and (pod.metadata.annotations or {}).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
        return pod if bound else None

    with suppress(TimedOut):
        return wait_until(released, timeout=timeout, interval=0.2)
    raise AssertionError(f"{ns}/{name} not bound and released: {hami_reasons.pending_reason(core, ns, name).text}")


def wait_reason(core, ns: str, name: str, code: str, node: str = NODE, timeout: float = 60) -> str:
    """Until HAMi's reason is read for that node: kube-scheduler's message (HAMi 2.10 puts the
    code there) may come before HAMi's event, which is the one naming the node."""
    seen = {"text": ""}

    def said() -> str:
        reason = hami_reasons.pending_reason(core, ns, name)
        seen["text"] = reason.text
        return reason.text if code in reason.by_node.get(node, []) else ""

    with suppress(TimedOut):
        text = wait_until(said, timeout=timeout, interval=1)
        assert not core.read_namespaced_pod(name, ns).spec.node_name
        return text
    raise AssertionError(f"{ns}/{name}: expected HAMi's {code}, got {seen['text']!r}")


def test_hamis_webhook_sets_its_scheduler(lab, ns):
    cluster, hami, _ = lab
    core = cluster.core()
    gpu_pod(core, ns, "probe", 1000, 5)
    assert core.read_namespaced_pod("probe", ns).spec.scheduler_name == ha.SCHEDULER_NAME
    print(f"HAMi metrics generation: {hami.metric_generation()}")


def test_reference_lab_on_hamis_scheduler(lab, ns):
    """Three 20000 MB / 30 % pods share the A100; a fourth 30 % pod and a 90000 MB pod wait with
    HAMi's own reasons; every pod is released by the controller without a manual step."""
    cluster, _, controller = lab
    core = cluster.core()
    for i in range(3):
        gpu_pod(core, ns, f"share-{i}", 20000, 30)
    pods = [wait_bound(core, ns, f"share-{i}") for i in range(3)]
    cards = {ha.decode_pod_devices(p.metadata.annotations[ha.DEVICES_ALLOCATED])[0][0].uuid for p in pods}
    assert cards == {f"GPU-team-a-{NODE}-0"}
    gpu_pod(core, ns, "fourth", 20000, 30)
    text = wait_reason(core, ns, "fourth", "CardInsufficientCore")
    print(f"fourth: {text}")
    assert f"CardInsufficientCore on {NODE}" in text
    gpu_pod(core, ns, "too-big", 90000, 10)
    text = wait_reason(core, ns, "too-big", "CardInsufficientMemory")
    print(f"too-big: {text}")
    assert f"CardInsufficientMemory on {NODE}" in text
    value = controller.metrics.registry.get_sample_value
    freed = value("gpu_tenancy_locks_freed_at_allocation_total") or 0
    assert freed + (value("gpu_tenancy_releases_total", {"outcome": "released"}) or 0) >= 3
    for node in core.list_node().items:
        lock = (node.metadata.annotations or {}).get(ha.NODE_LOCK)
        assert lock is None, f"lock left on {node.metadata.name}: {lock}"


def test_ten_slices_created_at_once_all_bind(lab, ns):
    """What a team's Deployment does: ten pods at once on one card, each waiting for the lock of
    the one before; the controller releases every one."""
    cluster, _, _ = lab
    core = cluster.core()
    for i in range(8):
        gpu_pod(core, ns, f"burst-{i}", 8000, 10)
    for i in range(8):
        wait_bound(core, ns, f"burst-{i}", timeout=180)


def test_a_pod_over_the_budget_is_refused_by_hami(lab, ns):
    """The runtime quota's two spellings: the API server counts what a pod declares (a bare
    nvidia.com/gpu declares no memory), HAMi counts what it allocates (a whole card). With a
    share of one card, a second pod gets past the API server and HAMi refuses it: HAMi 2.8's
    scheduler with ResourceQuotaNotFit, HAMi 2.10's webhook already at admission."""
    cluster, _, _ = lab
    core = cluster.core()
    hard = quota_hard(Quota(gpus=10, gpumem_mb=A100_MB, gpucores=100))
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "gpu-quota"}, "spec": {"hard": hard}})
    whole = client.V1ResourceRequirements(limits={ha.RES_GPU: "1"})
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="whole-card"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox", resources=whole)]),
        ),
    )
    wait_bound(core, ns, "whole-card")
    try:
        gpu_pod(core, ns, "one-more", 1000, 0)  # the API server saw 0 MB declared so far
    except client.ApiException as exc:
        assert exc.status == 403 and "vgpu.hami.io" in exc.body, exc.body
        reason = hami_reasons.parse([], str(exc.body))
        print(f"one-more refused at admission: {reason.text}")
        assert reason.codes == [hami_reasons.QUOTA_EXCEEDED]
        return
    text = wait_reason(core, ns, "one-more", "ResourceQuotaNotFit")
    print(f"one-more: {text}")


@pytest.mark.parametrize("node_name", ["a%b", f"{NODE}/status"])
def test_a_poison_pod_does_not_stop_releases_on_hamis_scheduler(lab, ns, node_name):
    """A pod carrying only HAMi-looking annotations (no GPU) beside three real GPU pods on the
    one A100: HAMi binds them one after another and the controller releases each, the second
    and third never waiting out HAMi's 5-minute lock; the poison pod is counted once."""
    cluster, _, controller = lab
    core = cluster.core()
    value = controller.metrics.registry.get_sample_value
    before = value("gpu_tenancy_pods_not_handled_total", {"reason": "invalid-node-name"}) or 0
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(
                name="poison", annotations={ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: node_name}
            ),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        ),
    )
    start = time.monotonic()
    for i in range(3):
        gpu_pod(core, ns, f"after-poison-{i}", 20000, 30)
    pods = [wait_bound(core, ns, f"after-poison-{i}", timeout=120) for i in range(3)]
    took = time.monotonic() - start
    print(f"three pods after a poison pod ({node_name!r}) bound and released in {took:.1f} s")
    assert took < 120, "a pod waited out HAMi's node lock"
    assert {p.spec.node_name for p in pods} == {NODE}
    assert (value("gpu_tenancy_pods_not_handled_total", {"reason": "invalid-node-name"}) or 0) == before + 1
    assert controller.healthy()
    assert ha.NODE_LOCK not in (core.read_node(NODE).metadata.annotations or {})
