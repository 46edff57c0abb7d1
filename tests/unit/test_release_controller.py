"""The release controller's decisions on a fake API client (tests/support/fake_kube.py): one pod
never stops the others, "not ours" is said once and counted, refusals are retried with the pod's
own backoff, a stuck pod is reported (gauge, Event) and never makes the controller unhealthy,
health measures the controller itself (watch, workers, queue age), reasons are looked up off the
release path and bookkeeping goes with the pod, even one deleted while a worker holds it. The
same behaviour on a real kube-apiserver is in tests/integration/test_release_controller.py."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import pytest
from kubernetes.client import ApiException

from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.names import MOCK_GPU_NODE_LABEL
from tests.support.clock import FakeClock
from tests.support.fake_kube import Answer, FakeCore
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


class EventCore(FakeCore):
    """FakeCore that also takes core/v1 Events (kept in `events`, as the reason lookup reads them)."""

    def create_namespaced_event(self, namespace: str, body: dict, **_kw) -> Answer:
        self._call("create_namespaced_event", f"{namespace}/{body['involvedObject']['name']}")
        self.events.append(body)
        return Answer(body)


@pytest.fixture
def core() -> EventCore:
    fake = EventCore()
    fake.add_node("gpu-0", labels=MOCK)
    return fake


def controller(core: FakeCore, **kwargs) -> rc.ReleaseController:
    c = rc.ReleaseController(core, **{"pod_backoff_max": 0.05, **kwargs})
    c.synced.set()
    return c


def stuck_events(core: EventCore, name: str) -> list[dict]:
    return [e for e in core.events if e["involvedObject"]["name"] == name and e["reason"] == "ReleaseStuck"]


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
    clock = FakeClock(1000.0)
    c = controller(core, stuck_seconds=60, clock=clock)
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
            clock.advance(0.06)
            c.drain()
    assert c.queue.failures((NS, "refused")) >= 3
    assert metric(c, "gpu_tenancy_pods_not_handled_total", reason=f"refused-{status}") == 1
    assert caplog.text.count("not released") == 1, "said more than once"
    clock.advance(61)
    c._advanced()
    c.drain()
    ok, why = c.health()
    assert ok and "1 pod(s) still allocating" in why and "refused" not in why
    assert metric(c, "gpu_tenancy_pods_stuck") == 1
    core.heal("patch_namespaced_pod", f"{NS}/refused")
    clock.advance(0.06)
    c.drain()
    assert core.pods[(NS, "refused")]["metadata"]["annotations"][ha.BIND_PHASE] == ha.PHASE_SUCCESS
    assert c.health() == (True, "ok")
    assert metric(c, "gpu_tenancy_pods_stuck") == 0


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
    assert c._pods[(NS, "waits")].reported and c._pods[(NS, "poison")].told
    c.forget((NS, "waits"))
    c.forget((NS, "poison"))
    assert not c._pods


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
    assert not c._pods


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

        def crashing(pod, seen=None, entry=None):
            calls["n"] += 1
            if pod["metadata"]["name"] == "boom":
                raise RuntimeError("a bug")
            return real(pod, seen, entry)

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


# -- item: one pod can no longer restart the controller -------------------------------------------
def test_refused_pod_never_restarts_controller(core):
    """A pod whose release is refused for ever, over ten minutes: the controller stays healthy at
    every watchdog check (so --exit-when-unhealthy never fires), the pod is counted stuck and told
    once on the pod itself, and every other pod is released meanwhile."""
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, pod_backoff_max=30, stuck_seconds=60)
    core.add_node("gpu-1", labels=MOCK)
    core.fail("patch_namespaced_pod", f"{NS}/refused", 403)
    c.observe(allocating(core, "refused", "gpu-0"))
    unhealthy = []
    for second in range(0, 600, 5):  # the daemon's watchdog looks every 5 s
        clock.advance(5)
        c._advanced()  # the watch goes on (bookmarks, other pods)
        if second % 60 == 0:
            name = f"other-{second}"
            c.observe(allocating(core, name, "gpu-1"))
        c.drain()
        if second % 60 == 0:
            assert released(core, name, "gpu-1")
        ok, why = c.health()
        if not ok:
            unhealthy.append((second, why))
    assert not unhealthy
    assert metric(c, "gpu_tenancy_pods_stuck") == 1
    assert c.queue.failures((NS, "refused")) > 5, "not retried"
    [event] = stuck_events(core, "refused")
    assert event["type"] == "Warning" and event["involvedObject"]["uid"] == f"uid-{NS}-refused"
    assert event["metadata"]["namespace"] == NS and "gpu-0" in event["message"] and "403" in event["message"]
    assert metric(c, "gpu_tenancy_pod_events_total", reason="ReleaseStuck") == 1


def test_a_stuck_pod_is_told_again_while_it_lasts_and_afresh_after_a_release(core):
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, pod_backoff_max=30, stuck_seconds=60)
    core.fail("patch_namespaced_pod", f"{NS}/refused", 422)
    c.observe(allocating(core, "refused", "gpu-0"))
    for _ in range(int((rc.EVENT_EVERY_SECONDS + 120) / 10)):
        clock.advance(10)
        c.drain()
    assert len(stuck_events(core, "refused")) == 2, "not told again after the Event lapsed"
    core.heal("patch_namespaced_pod", f"{NS}/refused")
    clock.advance(30)
    c.drain()
    assert released(core, "refused", "gpu-0") and metric(c, "gpu_tenancy_pods_stuck") == 0
    # the same name allocating again, and refused again: a new spell, told again
    core.fail("patch_namespaced_pod", f"{NS}/refused", 422)
    c.observe(allocating(core, "refused", "gpu-0"))
    for _ in range(10):
        clock.advance(10)
        c.drain()
    assert len(stuck_events(core, "refused")) == 3


def test_an_event_that_cannot_be_posted_is_counted_and_changes_nothing_else(core):
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, stuck_seconds=1)
    core.fail("patch_namespaced_pod", f"{NS}/refused", 403)
    core.fail("create_namespaced_event", f"{NS}/refused", 403)
    c.observe(allocating(core, "refused", "gpu-0"))
    for _ in range(5):
        clock.advance(1)
        c.drain()
    assert metric(c, "gpu_tenancy_release_failures_total", kind="event") == 1
    assert c.health()[0] and metric(c, "gpu_tenancy_pods_stuck") == 1


def test_health_says_counts_never_names(core):
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, stuck_seconds=1)
    for i in range(7):
        core.add_node(f"n{i}", labels=MOCK)
        core.fail("patch_namespaced_pod", f"{NS}/secret-project-{i}", 403)
        c.observe(allocating(core, f"secret-project-{i}", f"n{i}"))
    clock.advance(2)
    c.drain()
    ok, why = c.health()
    assert ok and "7 pod(s)" in why and "secret" not in why and NS not in why
    for _ in range(3):  # the queue waits too (no worker takes it): still no name
        c.observe(unschedulable(core, "secret-waits"))
    clock.advance(c.queue_seconds + 1)
    ok, why = c.health()
    assert not ok and "secret" not in why and NS not in why


def test_health_fails_when_no_worker_takes_a_ready_pod(core):
    """Queue age: a pod ready for a worker and left waiting means the workers are wedged; pods
    waiting out their own backoff are not counted (they wait by design)."""
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, queue_seconds=120, pod_backoff_max=600)
    core.fail("patch_namespaced_pod", f"{NS}/slow", 503)
    c.observe(allocating(core, "slow", "gpu-0"))
    for _ in range(12):
        c.drain()
        clock.advance(c.queue.backoff((NS, "slow")) - 0.01)  # its next retry is not yet due
        c._advanced()
        assert c.health()[0], c.health()[1]
    c.observe(unschedulable(core, "waits"))
    clock.advance(119)
    c._advanced()
    assert c.health()[0]
    clock.advance(2)
    c._advanced()
    ok, why = c.health()
    assert not ok and "has waited 121 s" in why
    c.drain()
    assert c.health()[0]


def test_health_fails_when_a_worker_died(core):
    c = controller(core)
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    c._threads = [dead]
    ok, why = c.health()
    assert not ok and "1 of 1 worker threads died" in why


# -- item: bookkeeping of a pod that goes while a worker holds it ---------------------------------
def _deleted_during(c: rc.ReleaseController, core: EventCore, verb: str, pod: str, status: int | None) -> None:
    """Make the next `verb` call see pod `pod` deleted (the watch's DELETED handled meanwhile),
    then answer HTTP `status` (None: answer as usual)."""
    real = getattr(core, verb)

    def call(*args, **kwargs):
        setattr(core, verb, real)
        core.pods.pop((NS, pod), None)
        c.forget((NS, pod))
        if status is not None:
            raise ApiException(status=status, reason="injected")
        return real(*args, **kwargs)

    setattr(core, verb, call)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_pod_deleted_while_its_release_fails_leaves_no_phantom(core, status):
    """Deleted, then its in-flight release answers 5xx: no retry, no backoff, no stuck pod."""
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, stuck_seconds=1)
    c.observe(allocating(core, "doomed", "gpu-0"))
    _deleted_during(c, core, "patch_node", "doomed", status)
    c.drain()
    assert not c._pods
    assert c.queue.failures((NS, "doomed")) == 0 and not c.queue._waiting
    clock.advance(5)
    c.drain()
    assert metric(c, "gpu_tenancy_pods_stuck") == 0 and c.health() == (True, "ok")
    assert metric(c, "gpu_tenancy_pod_retries_total") == 0


def test_a_pod_forgotten_before_its_handling_starts_leaves_no_phantom(core, monkeypatch):
    """The DELETED event between a worker taking the pod and its handling: still no stuck pod."""
    clock = FakeClock(1000.0)
    c = controller(core, clock=clock, stuck_seconds=1)
    core.fail("patch_namespaced_pod", f"{NS}/doomed", 503)
    real = c.handle

    def late(pod, seen=None, entry=None):
        c.forget((NS, "doomed"))
        return real(pod, seen, entry)

    monkeypatch.setattr(c, "handle", late)
    c.observe(allocating(core, "doomed", "gpu-0"))
    c.drain()
    clock.advance(5)
    c.drain()
    assert metric(c, "gpu_tenancy_pods_stuck") == 0 and c.health() == (True, "ok")
    assert not c._pods and c.queue.failures((NS, "doomed")) == 0


def test_add_rate_limited_after_forget_starts_fresh(core):
    """A pod that failed often, deleted while one more attempt fails, then created again under
    the same name (a StatefulSet's pod): its first retry waits the base delay, not the old one."""
    c = controller(core, pod_backoff_max=30)
    core.fail("patch_namespaced_pod", f"{NS}/web-0", 503)
    c.observe(allocating(core, "web-0", "gpu-0"))
    for _ in range(4):
        c.process((NS, "web-0"))
    assert c.queue.failures((NS, "web-0")) == 4
    c.queue._waiting.clear()
    _deleted_during(c, core, "read_node", "web-0", 503)
    c.process((NS, "web-0"))
    assert c.queue.failures((NS, "web-0")) == 0
    c.observe(allocating(core, "web-0", "gpu-0"))
    c.process((NS, "web-0"))
    assert c.queue.failures((NS, "web-0")) == 1
    assert c.queue.backoff((NS, "web-0")) == 2 * c.queue.base_delay


def test_a_retry_of_a_forgotten_pod_is_dropped_with_its_backoff(core):
    """A key that comes back for a pod no longer kept: processed, it leaves no failure count."""
    c = controller(core)
    c.queue.add_rate_limited((NS, "gone"))
    c.process((NS, "gone"))
    assert c.queue.failures((NS, "gone")) == 0


def test_a_pod_deleted_during_the_lock_step_leaves_no_note_for_its_successor(core):
    """Its lock freed at allocation, the pod deleted meanwhile, then made again with the same name,
    node and bind second: the successor's own lock is released too (no stale "already freed")."""
    c = controller(core)
    first = allocating(core, "db-0", "gpu-0", bound=False)
    c.observe(first)
    _deleted_during(c, core, "patch_node", "db-0", None)
    c.drain()
    assert not c._pods
    bind_time = first["metadata"]["annotations"][ha.BIND_TIME]
    successor = allocating(core, "db-0", "gpu-0", **{ha.BIND_TIME: bind_time})
    c.observe(successor)
    c.drain()
    assert released(core, "db-0", "gpu-0"), "the successor's lock was left"


def test_a_not_ours_pod_deleted_while_handled_leaves_nothing(core):
    c = controller(core)
    core.add_node("odd", labels=MOCK)
    core.fail("read_node", "odd", 403)
    c.observe(allocating(core, "odd-pod", "odd", bound=False))
    real = core.read_node

    def read(name, **kw):
        c.forget((NS, "odd-pod"))
        return real(name, **kw)

    core.read_node = read
    c.drain()
    assert not c._pods and c.queue.failures((NS, "odd-pod")) == 0
    core.read_node = real  # made again under the same name: said and counted again, as a new pod
    c.observe(allocating(core, "odd-pod", "odd", bound=False))
    c.drain()
    assert metric(c, "gpu_tenancy_pods_not_handled_total", reason="node-403") == 2


# -- item: one node answering 5xx at the first list -----------------------------------------------
def orphaned(core: EventCore, node: str, pod: str) -> None:
    """A lock a cut release left: naming a pod whose bind-phase is already success."""
    core.add_node(node, labels=MOCK, annotations={ha.NODE_LOCK: lock(NS, pod)})
    core.add_pod(NS, pod, {ha.BIND_PHASE: ha.PHASE_SUCCESS, ha.VGPU_NODE: node}, node=node)


@pytest.mark.parametrize(
    "verb, name, status",
    [("patch_node", "bad", 503), ("patch_node", "bad", 500), ("patch_node", "bad", 429), ("list_node", "", 503)],
)
def test_one_node_answering_5xx_never_stops_the_first_list(core, monkeypatch, verb, name, status):
    monkeypatch.setattr(rc.watch, "Watch", FakeWatch)
    orphaned(core, "bad", "done-a")
    orphaned(core, "good", "done-b")
    core.fail(verb, name, status)
    pod = allocating(core, "waiting", "gpu-0")
    c = rc.ReleaseController(core, workers=1)
    FakeWatch.started, FakeWatch.scripts = [], [[{"type": "MODIFIED", "raw_object": pod}], []]
    c._watch_once()
    assert c.synced.is_set() and c.resource_version is not None
    assert metric(c, "gpu_tenancy_release_failures_total", kind="sweep") == 1
    if verb == "patch_node":
        assert ha.NODE_LOCK not in core.nodes["good"]["metadata"]["annotations"], "one node stopped the others"
    c.drain()
    assert released(core, "waiting", "gpu-0")
    core.heal(verb, name)
    c._watch_once()  # the next watch request tries the rest again
    assert ha.NODE_LOCK not in core.nodes["bad"]["metadata"]["annotations"]
    assert ha.NODE_LOCK not in core.nodes["good"]["metadata"]["annotations"]
    assert c._sweep_due is None and FakeWatch.started == [c.resource_version, FakeWatch.started[1]]
