"""The release controller's loop: list, then watch pods, and release each one HAMi leaves
`allocating` on a mock-GPU node (`lock.release_pod`), whether the stack declared it or not. Why
nothing one pod carries can stop it, and how health is judged: see the package's docstring.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import tenacity
from kubernetes import watch

from components.config.names import MOCK_GPU_NODE_LABEL
from components.gpu import hami_annotations as ha
from components.ops import hami_reasons
from components.ops.kube import REQUEST_TIMEOUT, get_json, http_status
from components.ops.release import lock as lr
from components.ops.release.metrics import Metrics
from components.ops.release.pods import Key, allocating, bind_delay, key_of, stage, unschedulable, worth_handling
from components.ops.release.workqueue import WorkQueue

log = logging.getLogger("gpu-tenancy.release-controller")

# Seconds one watch request stays open before the server ends it and we resume.
WATCH_SECONDS = 60
BACKOFF_MAX_SECONDS = 10.0
# A pod's own retries back off from 50 ms up to this.
POD_BACKOFF_MAX_SECONDS = 30.0
# A pod bound to a mock node and still allocating this long means the controller is stuck.
STUCK_SECONDS = 60.0
WORKERS = 4
# Pending pods waiting for a reason lookup; more are dropped (and counted).
REASON_QUEUE = 1000


class ReleaseController:
    """List, then watch pods; workers release each one HAMi leaves allocating on a mock-GPU node."""

    def __init__(
        self,
        core: Any,
        *,
        namespace: str | None = None,
        node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
        metrics: Metrics | None = None,
        watch_seconds: int = WATCH_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        pod_backoff_max: float = POD_BACKOFF_MAX_SECONDS,
        stuck_seconds: float = STUCK_SECONDS,
        workers: int = WORKERS,
        reason_queue: int = REASON_QUEUE,
    ):
        self.core = core
        self.namespace = namespace
        self.node_label = node_label
        self.metrics = metrics or Metrics()
        self.watch_seconds = watch_seconds
        self.backoff_max = backoff_max
        self.stuck_seconds = stuck_seconds
        self.workers = workers
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.queue = WorkQueue(max_delay=pod_backoff_max)
        self.reasons = WorkQueue(max_len=reason_queue)
        self._lock = threading.Lock()
        # Per pod worth handling: its newest object and when the watch showed it so.
        self._pods: dict[Key, tuple[Mapping[str, Any], float]] = {}
        # Pods bound to a mock node and still allocating: since when (monotonic).
        self._since: dict[Key, float] = {}
        # What was said once about a pod: its Pending reason, or why it is not handled.
        self._reported: dict[Key, str] = {}
        self._told: dict[Key, str] = {}
        # Pods whose node lock was freed at allocation: (node, HAMi's bind time) of that allocation.
        self._freed: dict[Key, tuple[str, str | None]] = {}
        self._threads: list[threading.Thread] = []
        self._progress = time.monotonic()
        self._watch: watch.Watch | None = None
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.metrics.stuck.set_function(lambda: len(self._stuck()))

    # -- health -------------------------------------------------------------------------
    def _contact(self) -> None:
        self.metrics.last_contact.set_to_current_time()

    def _advanced(self) -> None:
        self._progress = time.monotonic()
        self._contact()

    def health(self) -> tuple[bool, str]:
        """(healthy, why): the watch advanced within two watch periods, every worker runs, and no
        pod bound to a mock node has stayed allocating past `stuck_seconds`."""
        now = time.monotonic()
        if not self.synced.is_set():
            return False, "the first list of pods is not done"
        quiet = now - self._progress
        if quiet > 2 * self.watch_seconds + 30:
            return False, f"the watch has not advanced for {quiet:.0f} s"
        if any(not t.is_alive() for t in self._threads) and not self.stopping.is_set():
            return False, "a worker thread died"
        stuck = self._stuck(now)
        if stuck:
            names = ", ".join(f"{ns}/{name}" for ns, name in stuck[:5]) + (" ..." if len(stuck) > 5 else "")
            return False, (
                f"{len(stuck)} pod(s) bound to a mock-GPU node still allocating after {self.stuck_seconds:g} s: {names}"
            )
        return True, "ok"

    def _stuck(self, now: float | None = None) -> list[Key]:
        now = time.monotonic() if now is None else now
        with self._lock:
            return sorted(k for k, since in self._since.items() if now - since > self.stuck_seconds)

    def healthy(self) -> bool:
        return self.health()[0]

    # -- what the watch sees ------------------------------------------------------------
    def observe(self, pod: Mapping[str, Any]) -> None:
        """Record the pod's newest state; queue it if it is worth handling, else forget it."""
        key = key_of(pod)
        if not worth_handling(pod):
            self.forget(key)
            return
        with self._lock:
            old = self._pods.get(key)
            same = old is not None and stage(old[0]) == stage(pod)
            self._pods[key] = (pod, old[1] if same else time.monotonic())
            if not same:
                self._since.pop(key, None)
        self.queue.add(key)

    def forget(self, key: Key) -> None:
        """The pod is gone or needs nothing more: drop every trace of it."""
        with self._lock:
            self._pods.pop(key, None)
            self._since.pop(key, None)
            self._reported.pop(key, None)
            self._told.pop(key, None)
            self._freed.pop(key, None)
        self.queue.forget(key)

    # -- one pod ------------------------------------------------------------------------
    def _tell_once(self, key: Key, what: str, message: str, level: int = logging.WARNING) -> bool:
        with self._lock:
            if self._told.get(key) == what:
                return False
            self._told[key] = what
        log.log(level, "%s/%s: %s", key[0], key[1], message)
        return True

    def process(self, key: Key) -> None:
        """Handle one pod in its own error boundary (a worker calls this)."""
        with self._lock:
            entry = self._pods.get(key)
        if entry is None:
            return
        pod, seen = entry
        try:
            self.handle(pod, seen)
        except lr.NotOurs as exc:
            with self._lock:
                self._since.pop(key, None)
            if self._tell_once(key, exc.reason, f"not ours, left alone: {exc}"):
                self.metrics.not_handled.labels(exc.reason).inc()
            self.queue.forget(key)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, lr.Refused) else f"error-{http_status(exc) or type(exc).__name__}"
            delay = self.queue.add_rate_limited(key)
            self.metrics.failures.labels("pod").inc()
            self.metrics.retries.inc()
            first = self._tell_once(key, reason, f"not released ({exc}); retrying with its own backoff")
            if first and isinstance(exc, lr.Refused):
                self.metrics.not_handled.labels(exc.reason).inc()
            log.debug("%s/%s: retry in %.2f s (%s)", key[0], key[1], delay, exc)
        else:
            self.queue.forget(key)

    def handle(self, pod: Mapping[str, Any], seen: float | None = None) -> lr.Outcome | None:
        """Release the pod if HAMi left it allocating on a node; queue a reason lookup if it
        waits unschedulable. Returns the release outcome, or None when there was nothing to do.
        Raises lr.NotOurs, lr.Refused or the API's error (the caller's boundary handles them)."""
        namespace, name = key = key_of(pod)
        seen = time.monotonic() if seen is None else seen
        if allocating(pod) and not (pod.get("spec") or {}).get("nodeName"):
            freed = lr.free_lock_at_allocation(self.core, namespace, name, pod, self.node_label)
            self._contact()
            if freed == lr.LOCK_RELEASED:
                with self._lock:
                    notes = lr.annotations(pod)
                    self._freed[key] = (notes[ha.VGPU_NODE], notes.get(ha.BIND_TIME))
                self.metrics.early.inc()
                log.debug("%s/%s: node lock freed at allocation, before the Binding", namespace, name)
            return None
        if allocating(pod):
            node = pod["spec"]["nodeName"]
            with self._lock:
                self._since.setdefault(key, seen)
                freed = self._freed.pop(key, None) == (node, lr.annotations(pod).get(ha.BIND_TIME))
            outcome = lr.release_pod(
                self.core, namespace, name, pod_obj=pod, node_label=self.node_label, freed_on=node if freed else None
            )
            self._contact()
            with self._lock:
                self._since.pop(key, None)
                self._told.pop(key, None)
            self.metrics.releases.labels(outcome.status).inc()
            if outcome.status in (lr.RELEASED, lr.SUCCEEDED):
                handled = time.monotonic() - seen
                delay = bind_delay(pod, time.time())
                self.metrics.handling.observe(handled)
                if delay is not None:
                    self.metrics.delay.observe(delay)
                log.info(
                    "%s/%s on %s: %s, %.3f s after the watch event, %s s after HAMi's bind time%s",
                    namespace,
                    name,
                    outcome.node,
                    outcome.status,
                    handled,
                    "?" if delay is None else f"{delay:.0f}",
                    f" ({outcome.detail})" if outcome.detail else "",
                )
            elif outcome.status == lr.NOT_MOCK:
                log.debug("%s/%s: %s", namespace, name, outcome.detail)
            else:
                log.info("%s/%s: %s %s", namespace, name, outcome.status, outcome.detail)
            return outcome
        waiting = unschedulable(pod)
        if waiting is not None:
            with self._lock:
                new = self._reported.get(key) != waiting
                self._reported[key] = waiting
            if new and not self.reasons.add(key):
                self.metrics.reasons_dropped.inc()
        return None

    def explain(self, key: Key) -> None:
        """Look up and log HAMi's reason for a Pending pod (the reason worker calls this)."""
        with self._lock:
            entry = self._pods.get(key)
        if entry is None or unschedulable(entry[0]) is None:
            return
        try:
            reason = hami_reasons.pending_reason(self.core, *key)
        except Exception as exc:  # best effort: the next condition change asks again
            self.metrics.failures.labels("reason").inc()
            log.debug("%s/%s: reason lookup failed (%s)", key[0], key[1], exc)
            return
        log.warning("%s/%s is Pending: %s", key[0], key[1], reason.text)

    # -- workers ------------------------------------------------------------------------
    def _work(self, queue: WorkQueue, handler: Any) -> None:
        while True:
            key = queue.get()
            if key is None:
                return
            try:
                handler(key)
            except Exception:  # the handlers have their own boundaries; this one keeps the thread
                log.exception("%s/%s: unexpected error", *key)
            finally:
                queue.done(key)

    def start_workers(self) -> None:
        for i in range(self.workers):
            self._threads.append(
                threading.Thread(target=self._work, args=(self.queue, self.process), name=f"release-{i}", daemon=True)
            )
        self._threads.append(
            threading.Thread(target=self._work, args=(self.reasons, self.explain), name="reasons", daemon=True)
        )
        for t in self._threads:
            t.start()

    def drain(self) -> None:
        """Handle what is queued now, in this thread, then return (for `--once`)."""
        while (key := self.queue.get(timeout=0)) is not None:
            try:
                self.process(key)
            finally:
                self.queue.done(key)
        while (key := self.reasons.get(timeout=0)) is not None:
            try:
                self.explain(key)
            finally:
                self.reasons.done(key)

    # -- list and watch -----------------------------------------------------------------
    def _list(self) -> dict[str, Any]:
        if self.namespace:
            return get_json(self.core.list_namespaced_pod, self.namespace)
        return get_json(self.core.list_pod_for_all_namespaces)

    def relist(self) -> None:
        """Record every pod as it is now (those already allocating included), forget those that
        went while the watch was down, free locks a cut release left; the watch starts from the
        list's resourceVersion."""
        listed = self._list()
        self.metrics.relists.inc()
        items = listed.get("items", [])
        present = {key_of(p) for p in items}
        with self._lock:
            gone = [k for k in self._pods if k not in present]
        for key in gone:
            self.forget(key)
        for pod in items:
            self.observe(pod)
        lr.release_orphaned_locks(self.core, items, self.node_label)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.synced.set()
        self._advanced()
        log.info("listed %d pods at resourceVersion %s", len(items), self.resource_version)

    def _watch_once(self) -> None:
        """One watch request from the last resourceVersion; returns when the server ends it."""
        if self.resource_version is None:
            self.relist()
        func = self.core.list_namespaced_pod if self.namespace else self.core.list_pod_for_all_namespaces
        args = (self.namespace,) if self.namespace else ()
        self._watch = watch.Watch(return_type="object")
        if self.stopping.is_set():  # stop() came before there was a watch to stop
            return
        self.metrics.watches.inc()
        try:
            for event in self._watch.stream(
                func,
                *args,
                resource_version=self.resource_version,
                timeout_seconds=self.watch_seconds,
                allow_watch_bookmarks=True,
                _request_timeout=(REQUEST_TIMEOUT[0], self.watch_seconds + REQUEST_TIMEOUT[1]),
            ):
                obj = event["raw_object"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.observe(obj)
                elif event["type"] == "DELETED":
                    self.forget(key_of(obj))
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.resource_version = version
                self._advanced()
                if self.stopping.is_set():
                    return
        except Exception as exc:
            if http_status(exc) == 410:
                log.info("resourceVersion %s expired (410 Gone): listing again", self.resource_version)
                self.resource_version = None
                return
            raise
        finally:
            self._watch = None
        self._advanced()

    def _on_error(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        self.metrics.failures.labels("api").inc()
        log.warning(
            "watch failed (%s: %s); retrying in %.1f s",
            type(exc).__name__,
            getattr(exc, "reason", None) or exc,
            state.next_action.sleep if state.next_action else 0,
        )

    def run(self) -> None:
        """Until stop(): workers on the queues; watch, resume, re-list on 410, back off on errors."""
        self.start_workers()
        retrying = tenacity.Retrying(
            wait=tenacity.wait_exponential_jitter(multiplier=0.2, max=self.backoff_max, jitter=0.5),
            stop=lambda _state: self.stopping.is_set(),
            sleep=self.stopping.wait,
            before_sleep=self._on_error,
            retry=tenacity.retry_if_exception_type(Exception),
            reraise=False,
        )
        try:
            while not self.stopping.is_set():
                try:
                    retrying(self._watch_once)
                except tenacity.RetryError:
                    return
        finally:
            self.queue.shutdown()
            self.reasons.shutdown()
            for t in self._threads:
                t.join(10)

    def stop(self) -> None:
        self.stopping.set()
        self.queue.shutdown()
        self.reasons.shutdown()
        w = self._watch
        if w is not None:
            w.stop()
