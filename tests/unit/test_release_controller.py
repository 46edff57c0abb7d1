"""The release controller's decisions on a fake API client (tests/support/fake_kube.py): one pod
never stops the others, "not ours" is said once and counted, refusals are retried with the pod's
own backoff, a stuck pod makes /healthz fail, reasons are looked up off the release path and
bookkeeping goes with the pod. The same behaviour on a real kube-apiserver is in
tests/integration/test_release_controller.py."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest

from components.config.names import MOCK_GPU_NODE_LABEL
from components.gpu import hami_annotations as ha
from components.ops.release import controller as rc
from tests.support.fake_kube import FakeCore
from tests.support.waits import settles

MOCK = dict([MOCK_GPU_NODE_LABEL])
NS = "team"


def lock(ns: str, pod: str) -> str:
    return ha.encode_node_lock(ha.NodeLock(datetime.now(UTC), ns, pod))


def allocating(core: FakeCore, name: str, node: str, bound: bool = True, **extra: str) -> dict:
    """A pod as HAMi's Bind leaves it (lock on the node, allocating, bound unless `bound=False`)."""
    if node in core.nodes:
        core.nodes[node]["metadata"]["annotations"][ha.NODE_LOCK] = lock(NS, name)
    notes = {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: node, ha.BIND_TIME: str(int(time.time())), **extra}
    return core.add_pod(NS, name, notes, node=node if bound else None)


def released(core: FakeCore, name: str, node: str) -> bool:
    return (
        core.pods[(NS, name)]["metadata"]["annotations"].get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
        and ha.NODE_LOCK not in core.nodes[node]["metadata"]["annotations"]
    )


def metric(c: rc.ReleaseController, name: str, **labels: str) -> float:
    return c.metrics.registry.get_sample_value(name, labels or None) or 0.0


@pytest.fixture
def core() -> FakeCore:
    fake = FakeCore()
    fake.add_node("gpu-0", labels=MOCK)
    return fake


def controller(core: FakeCore, **kwargs) -> rc.ReleaseController:
    c = rc.ReleaseController(core, **{"pod_backoff_max": 0.05, **kwargs})
    c.synced.set()
    return c


@pytest.mark.parametrize(
    "node, reason",
    [("a%b", "invalid-node-name"), ("gpu-0/status", "invalid-node-name"), ("A" * 300, "invalid-node-name")],
)
def test_a_pod_naming_an_impossible_node_is_not_ours_and_never_reaches_the_api(core, node, reason, caplog):
    c = controller(core)
    poison = core.add_pod(NS, "poison", {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: node})
    with caplog.at_level(logging.WARNING, logger="gpu-tenancy.release-controller"):
        for _ in range(3):  # the watch shows it again and again
            c.observe(poison)
            c.drain()
    assert not [call for call in core.calls if node in call[1]]
    assert metric(c, "gpu_tenancy_pods_not_handled_total", reason=reason) == 1
    assert caplog.text.count("not ours") == 1
    good = allocating(core, "good", "gpu-0")
    c.observe(good)
    c.drain()
    assert released(core, "good", "gpu-0")


@pytest.mark.parametrize("status", [400, 403, 422])
def test_a_4xx_on_a_node_a_pod_names_is_not_ours(core, status):
    core.add_node("odd", labels=MOCK)
    core.fail("read_node", "odd", status)
    c = controller(core)
    odd = allocating(core, "odd-pod", "odd", bound=False)
    good = allocating(core, "good", "gpu-0")
    c.observe(odd)
    c.observe(good)
    c.drain()
    c.observe(odd)
    c.drain()
    assert metric(c, "gpu_tenancy_pods_not_handled_total", reason=f"node-{status}") == 1
    assert released(core, "good", "gpu-0")
    assert c.queue.failures(("team", "odd-pod")) == 0, "retried though not ours"


@pytest.mark.parametrize("status", [400, 403, 422])
def test_a_refused_write_is_retried_with_the_pods_own_backoff_and_the_others_go_on(core, status, caplog):
    c = controller(core, stuck_seconds=0.2)
    refused = allocating(core, "refused", "gpu-0")
    core.fail("patch_namespaced_pod", f"{NS}/refused", status)
    core.add_node("gpu-1", labels=MOCK)
    with caplog.at_level(logging.WARNING, logger="gpu-tenancy.release-controller"):
        c.observe(refused)
        for i in range(3):  # each takes the lock the one before it held
            c.observe(allocating(core, f"p{i}", "gpu-1"))
            c.drain()
            assert released(core, f"p{i}", "gpu-1")
        for _ in range(3):  # its own retries, after its own backoff
            time.sleep(0.06)
            c.drain()
    assert c.queue.failures((NS, "refused")) >= 3
    assert metric(c, "gpu_tenancy_pods_not_handled_total", reason=f"refused-{status}") == 1
    assert caplog.text.count("not released") == 1, "said more than once"
    time.sleep(0.25)
    ok, why = c.health()
    assert not ok and f"{NS}/refused" in why and "still allocating" in why
    assert metric(c, "gpu_tenancy_pods_stuck") == 1
    core.heal("patch_namespaced_pod", f"{NS}/refused")
    time.sleep(0.06)
    c.drain()
    assert core.pods[(NS, "refused")]["metadata"]["annotations"][ha.BIND_PHASE] == ha.PHASE_SUCCESS
    assert c.health() == (True, "ok")


def test_a_server_error_is_retried_until_it_passes(core):
    c = controller(core)
    pod = allocating(core, "flaky", "gpu-0")
    core.fail("patch_node", "gpu-0", 503, times=2)
    c.observe(pod)
    for _ in range(4):
        c.drain()
        time.sleep(0.06)
    assert released(core, "flaky", "gpu-0")
    assert metric(c, "gpu_tenancy_pod_retries_total") == 2
    assert c.queue.failures((NS, "flaky")) == 0, "backoff not reset after success"


def test_a_pod_on_a_real_gpu_node_is_left_to_its_device_plugin(core):
    core.add_node("real-0")
    c = controller(core)
    c.observe(allocating(core, "real", "real-0"))
    c.drain()
    assert core.pods[(NS, "real")]["metadata"]["annotations"][ha.BIND_PHASE] == ha.PHASE_ALLOCATING
    assert metric(c, "gpu_tenancy_releases_total", outcome="not-mock") == 1
    assert c.health()[0], "a real GPU node's pod counted as stuck"


def test_lock_is_freed_at_allocation_before_the_binding(core):
    c = controller(core)
    c.observe(allocating(core, "early", "gpu-0", bound=False))
    c.drain()
    assert ha.NODE_LOCK not in core.nodes["gpu-0"]["metadata"]["annotations"]
    assert core.pods[(NS, "early")]["metadata"]["annotations"][ha.BIND_PHASE] == ha.PHASE_ALLOCATING
    assert metric(c, "gpu_tenancy_locks_freed_at_allocation_total") == 1


def test_a_pod_freed_at_allocation_is_finished_without_reading_its_node_again(core):
    c = controller(core)
    early = allocating(core, "early", "gpu-0", bound=False)
    c.observe(early)
    c.drain()
    reads = core.calls.count(("read_node", "gpu-0"))
    core.pods[(NS, "early")]["spec"]["nodeName"] = "gpu-0"  # the Binding lands
    c.observe(core.pod(NS, "early"))
    c.drain()
    assert core.pods[(NS, "early")]["metadata"]["annotations"][ha.BIND_PHASE] == ha.PHASE_SUCCESS
    assert core.calls.count(("read_node", "gpu-0")) == reads
    # another allocation of the same pod (HAMi's Bind retried: a new bind time) reads the node again
    retried = allocating(core, "retried", "gpu-0", bound=False)
    c.observe(retried)
    c.drain()
    core.pods[(NS, "retried")]["metadata"]["annotations"][ha.BIND_TIME] = "1"
    core.pods[(NS, "retried")]["spec"]["nodeName"] = "gpu-0"
    reads = core.calls.count(("read_node", "gpu-0"))
    c.observe(core.pod(NS, "retried"))
    c.drain()
    assert core.calls.count(("read_node", "gpu-0")) == reads + 1


def unschedulable(core: FakeCore, name: str, message: str = "0/1 nodes are available: 1 1/1 CardInsufficientCore."):
    cond = {"type": "PodScheduled", "status": "False", "message": message, "lastTransitionTime": "t1"}
    return core.add_pod(NS, name, scheduler=ha.SCHEDULER_NAME, conditions=[cond])


def test_reasons_are_looked_up_off_the_release_path_once_per_condition(core, caplog):
    c = controller(core)
    pod = unschedulable(core, "waits")
    with caplog.at_level(logging.WARNING, logger="gpu-tenancy.release-controller"):
        c.observe(pod)
        c.observe(pod)
        while (key := c.queue.get(timeout=0)) is not None:
            c.process(key)
            c.queue.done(key)
        assert not [v for v, _ in core.calls if v == "list_namespaced_event"], "looked up on the release path"
        c.drain()
        c.observe(pod)
        c.drain()
    assert caplog.text.count(f"{NS}/waits is Pending: HAMi: CardInsufficientCore") == 1


def test_the_reason_queue_is_bounded_and_drops_are_counted(core):
    c = controller(core, reason_queue=2)
    for i in range(5):
        c.observe(unschedulable(core, f"w{i}"))
    while (key := c.queue.get(timeout=0)) is not None:
        c.process(key)
        c.queue.done(key)
    assert len(c.reasons) == 2
    assert metric(c, "gpu_tenancy_reason_lookups_dropped_total") == 3


def test_bookkeeping_goes_with_the_pod(core):
    c = controller(core)
    c.observe(unschedulable(core, "waits"))
    c.observe(core.add_pod(NS, "poison", {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: "a%b"}))
    c.drain()
    assert c._reported and c._told
    c.forget((NS, "waits"))
    c.forget((NS, "poison"))
    assert not (c._pods or c._reported or c._told or c._since or c._freed)


def test_a_released_pod_is_forgotten_when_the_watch_shows_it_success(core):
    c = controller(core)
    c.observe(allocating(core, "done", "gpu-0"))
    c.drain()
    c.observe(core.pod(NS, "done"))
    assert not c._pods


def test_relist_forgets_pods_that_went_while_the_watch_was_down(core):
    c = controller(core)
    c.observe(unschedulable(core, "gone"))
    c.drain()
    del core.pods[(NS, "gone")]
    c.relist()
    assert not c._pods and not c._reported


class FakeWatch:
    """Replays scripted watch streams: each call to stream() takes the next script."""

    scripts: list = []

    def __init__(self, return_type=None):
        pass

    def stream(self, func, *args, resource_version=None, **kwargs):
        FakeWatch.started.append(resource_version)
        script = FakeWatch.scripts.pop(0)
        if isinstance(script, Exception):
            raise script
        yield from script

    def stop(self):
        pass


def test_the_watch_advances_past_a_poison_pod_and_resumes_from_its_last_version(core, monkeypatch):
    from kubernetes.client import ApiException

    monkeypatch.setattr(rc.watch, "Watch", FakeWatch)
    poison = core.add_pod(NS, "poison", {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: "a%b"})
    poison["metadata"]["resourceVersion"] = "100"
    good = allocating(core, "good", "gpu-0")
    good["metadata"]["resourceVersion"] = "101"
    FakeWatch.started = []
    FakeWatch.scripts = [
        [{"type": "MODIFIED", "raw_object": poison}, {"type": "MODIFIED", "raw_object": good}],
        ApiException(status=410, reason="Gone"),
        [],
    ]
    c = rc.ReleaseController(core, workers=1)
    c._watch_once()
    assert c.resource_version == "101"
    c._watch_once()
    assert c.resource_version is None  # 410: list again
    c._watch_once()
    assert FakeWatch.started[1] == "101", "did not resume from the last version it saw"
    assert metric(c, "gpu_tenancy_relists_total") == 2
    c.drain()
    assert released(core, "good", "gpu-0")


def test_health_fails_when_the_watch_stops_advancing(core):
    c = controller(core, watch_seconds=1)
    assert c.health()[0]
    c._progress -= 40
    ok, why = c.health()
    assert not ok and "has not advanced" in why


def test_workers_release_concurrently_and_survive_a_handler_crash(core, monkeypatch):
    c = rc.ReleaseController(core, workers=2)
    c.synced.set()
    c.start_workers()
    try:
        calls = {"n": 0}
        real = c.handle

        def crashing(pod, seen=None):
            calls["n"] += 1
            if pod["metadata"]["name"] == "boom":
                raise RuntimeError("a bug")
            return real(pod, seen)

        monkeypatch.setattr(c, "handle", crashing)
        c.observe(allocating(core, "boom", "gpu-0"))
        core.add_node("gpu-1", labels=MOCK)
        c.observe(allocating(core, "fine", "gpu-1"))
        settles(lambda: released(core, "fine", "gpu-1"), timeout=5, interval=0.01)
        assert released(core, "fine", "gpu-1")
        assert c.health()[0] or "still allocating" in c.health()[1]
        assert all(t.is_alive() for t in c._threads)
    finally:
        c.stop()
