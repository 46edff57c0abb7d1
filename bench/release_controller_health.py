"""The release controller's health against a pod whose release is refused for ever, and how long
it takes to stop.

1. restarts: ten minutes on a fake clock (no sleeping), with one pod whose bind-phase write the
   API refuses (403) on every attempt and a pod released on another node every minute. Every 5 s
   the daemon's watchdog rule is applied as the image runs it (`--exit-when-unhealthy 30`: exit
   once health() has failed 30 s in a row, after the first list); an exit counts as a restart and a
   fresh controller takes over, as Docker's restart policy would. Reports restarts, releases of the
   other pods, and the stuck gauge at the end.
2. stop: seconds from stop() (called from another thread, as the tests and any embedding do) to
   run() returning, against a real kube-apiserver (skipped when its binaries are not there): once
   with the watch open and quiet, once with stop() landing while the watch request is opened.

Run it from a checkout: `.venv/bin/python bench/release_controller_health.py`. It imports the
controller of the tree it sits in, so a copy in an older tree measures that tree.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.controllers.release import controller as rc  # noqa: E402
from components.controllers.release.workqueue import WorkQueue  # noqa: E402
from components.domain import hami_annotations as ha  # noqa: E402
from components.domain.names import MOCK_GPU_NODE_LABEL  # noqa: E402
from tests.support.fake_kube import FakeCore  # noqa: E402

NS = "team"
GRACE, INTERVAL, MINUTES = 30.0, 5.0, 10


class Core(FakeCore):
    def create_namespaced_event(self, namespace: str, body: dict, **_kw) -> None:
        self.events.append(body)


def allocating(core: Core, name: str, node: str) -> None:
    lock = ha.encode_node_lock(ha.NodeLock(ha_now(), NS, name))
    core.nodes[node]["metadata"]["annotations"][ha.NODE_LOCK] = lock
    notes = {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: node, ha.BIND_TIME: str(int(time.time()))}
    core.add_pod(NS, name, notes, node=node)


def ha_now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def make_controller(core: Core, clock: Callable[[], float]) -> rc.ReleaseController:
    """A controller on the fake clock (the clock parameter where the tree has one, else its module's
    time patched), listed as at start."""
    if "clock" in inspect.signature(rc.ReleaseController).parameters:
        c = rc.ReleaseController(core, pod_backoff_max=30.0, clock=clock)
    else:
        rc.time = types.SimpleNamespace(monotonic=clock, time=time.time)  # type: ignore[assignment]
        c = rc.ReleaseController(core, pod_backoff_max=30.0)
        c.queue = WorkQueue(max_delay=30.0, clock=clock)
    c.relist()
    return c


def restarts() -> dict[str, float]:
    now = [0.0]

    def clock() -> float:
        return now[0]

    core = Core()
    core.add_node("gpu-0", labels=dict([MOCK_GPU_NODE_LABEL]))
    core.add_node("gpu-1", labels=dict([MOCK_GPU_NODE_LABEL]))
    core.fail("patch_namespaced_pod", f"{NS}/refused", 403)
    allocating(core, "refused", "gpu-0")
    c = make_controller(core, clock)
    count, bad_since, others, released = 0, None, 0, 0
    step = 1.0
    while now[0] < MINUTES * 60:
        now[0] += step
        c._advanced()  # the watch goes on
        if now[0] % 60 == 0:
            others += 1
            allocating(core, f"other-{others}", "gpu-1")
            c.observe(core.pod(NS, f"other-{others}"))
        c.drain()
        if now[0] % INTERVAL == 0:
            ok = c.health()[0]
            if ok or not c.synced.is_set():
                bad_since = None
            else:
                bad_since = bad_since if bad_since is not None else now[0]
                if now[0] - bad_since >= GRACE:
                    count += 1
                    bad_since = None
                    c = make_controller(core, clock)
    for i in range(1, others + 1):
        notes = core.pods[(NS, f"other-{i}")]["metadata"]["annotations"]
        released += notes.get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
    stuck = c.metrics.registry.get_sample_value("gpu_tenancy_pods_stuck") or 0.0
    events = sum(1 for e in core.events if e.get("reason") == "ReleaseStuck")
    return {"restarts": count, "others": others, "released": released, "stuck": stuck, "events": events}


def stop_seconds(settle: float, repeat: int = 3) -> list[float] | None:
    """stop() `settle` seconds after the watch request was counted (0: while it is being opened)."""
    try:
        from components.kube.client import core_api
        from tests.support.cluster import start_cluster
        from tests.support.tools import tools_env

        cluster = start_cluster(tools_env())
    except Exception as exc:  # no binaries here
        print(f"stop: skipped ({exc})")
        return None
    out = []
    try:
        for _ in range(repeat):
            c = rc.ReleaseController(core_api(cluster.kubeconfig_text), namespace="default")
            thread = threading.Thread(target=c.run, daemon=True)
            thread.start()
            c.synced.wait(30)
            while (c.metrics.registry.get_sample_value("gpu_tenancy_watch_sessions_total") or 0) < 1:
                time.sleep(0.01)
            time.sleep(settle)
            start = time.monotonic()
            c.stop()
            thread.join(120)
            out.append(time.monotonic() - start)
    finally:
        cluster.stop()
    return out


def main() -> None:
    r = restarts()
    print(
        f"restarts over {MINUTES} min with a pod refused for ever: {r['restarts']} "
        f"(other pods released: {r['released']}/{r['others']}; stuck gauge {r['stuck']:g}; "
        f"ReleaseStuck Events: {r['events']})"
    )
    for settle, what in ((1.0, "its watch open and quiet"), (0.0, "its watch being opened")):
        seconds = stop_seconds(settle)
        if seconds is not None:
            print(f"stop() to run() returning, {what}: " + ", ".join(f"{s:.2f} s" for s in seconds))


if __name__ == "__main__":
    main()
