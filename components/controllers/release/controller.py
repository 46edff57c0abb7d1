"""The release controller's loop: list, then watch pods, and release each one HAMi leaves
`allocating` on a mock-GPU node (`lock.release_pod`), whether the stack declared it or not. Why
nothing one pod carries can stop it, and how health is judged: see the package's docstring.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import tenacity
from kubernetes import watch

from components.controllers.release import lock as lr
from components.controllers.release import readmit as rd
from components.controllers.release.metrics import Metrics
from components.controllers.release.pods import (
    Key,
    allocating,
    bind_delay,
    key_of,
    stage,
    unschedulable,
    worth_handling,
)
from components.controllers.release.policy import EVENT_SOURCE, STUCK_REASON
from components.controllers.release.workqueue import WorkQueue
from components.domain import hami_annotations as ha
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.kube import hami_reasons
from components.kube.client import REQUEST_TIMEOUT, get_json, http_status, send

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

log = logging.getLogger("gpu-tenancy.release-controller")

# Seconds one watch request stays open before the server ends it and we resume.
WATCH_SECONDS = 60
BACKOFF_MAX_SECONDS = 10.0
# A pod's own retries back off from 50 ms up to this.
POD_BACKOFF_MAX_SECONDS = 30.0
# A pod bound to a mock node and still allocating this long is reported stuck (gauge, Event).
STUCK_SECONDS = 60.0
# A stuck pod's Event is posted again this often (the API server lets Events lapse after an hour).
EVENT_EVERY_SECONDS = 1800.0
# Unhealthy when a pod ready for a worker has waited this long: the workers stopped taking them.
QUEUE_SECONDS = 120.0
WORKERS = 4
# Pending pods waiting for a reason lookup; more are dropped (and counted).
REASON_QUEUE = 1000
# Seconds run() waits for its workers once stopped (they are daemon threads).
STOP_SECONDS = 5.0


@dataclass(eq=False)
class _Pod:
    """Everything kept about one pod, in one place: forgetting the pod drops the entry and all of
    it, and a worker still holding the entry of a pod deleted meanwhile writes only to this orphan,
    so nothing it does late can leave a trace (a phantom stuck pod, a lock note, a said-once)."""

    obj: Mapping[str, Any]
    # When the watch showed it in its current stage (allocating or not, and its node).
    seen: float
    # Bound to a mock node and still allocating: since when.
    since: float | None = None
    # What was said once: its Pending reason, or why it is not handled.
    reported: str | None = None
    told: str | None = None
    # Its node lock freed at allocation: (node, HAMi's bind time) of that allocation.
    freed: tuple[str, str | None] | None = None
    # When a stuck Event was last posted for it (None: not in this stuck spell).
    evented: float | None = None


def _hang_up(resp: Any) -> None:
    """End a streaming response from another thread: the reader blocked on it returns at once
    (urllib3's shutdown(), else the socket's), where closing the watch alone would wait for the
    next event or the server's timeout. A response already finished needs nothing."""
    try:
        resp.shutdown()
        return
    except (AttributeError, ValueError, OSError):  # an older urllib3, or no socket left to shut
        pass
    conn = getattr(resp, "_connection", None) or getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ReleaseController:
    """List, then watch pods; workers release each one HAMi leaves allocating on a mock-GPU node."""

    def __init__(
        self,
        core: CoreV1Api,
        *,
        namespace: str | None = None,
        node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
        metrics: Metrics | None = None,
        watch_seconds: int = WATCH_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        pod_backoff_max: float = POD_BACKOFF_MAX_SECONDS,
        stuck_seconds: float = STUCK_SECONDS,
        queue_seconds: float = QUEUE_SECONDS,
        workers: int = WORKERS,
        reason_queue: int = REASON_QUEUE,
        clock: Callable[[], float] = time.monotonic,
        readmit: Iterable[Key] = (),
    ):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.core = core
        self.namespace = namespace
        self.node_label = node_label
        self.metrics = metrics or Metrics()
        self.watch_seconds = watch_seconds
        self.backoff_max = backoff_max
        self.stuck_seconds = stuck_seconds
        self.queue_seconds = queue_seconds
        self.workers = workers
        # The stack's bare pods, made again when a kubelet refuses them at admission (readmit).
        self.readmit = frozenset(readmit)
        self._clock = clock
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.queue = WorkQueue(max_delay=pod_backoff_max, clock=clock)
        self.reasons = WorkQueue(max_len=reason_queue, clock=clock)
        self._lock = threading.Lock()
        # Per pod worth handling, everything kept about it.
        self._pods: dict[Key, _Pod] = {}
        # Pods finished (bind-phase success) at the last list whose node locks a cut release may
        # have left: freed after the list, tried again with each watch until that succeeds.
        self._sweep_due: set[Key] | None = None
        self._threads: list[threading.Thread] = []
        self._progress = clock()
        self._watch: watch.Watch | None = None
        # The open watch response, hung up by stop().
        self._stream: Any = None
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.metrics.stuck.set_function(lambda: len(self._stuck()))

    # -- health -------------------------------------------------------------------------
    def _contact(self) -> None:
        self.metrics.last_contact.set_to_current_time()

    def _advanced(self) -> None:
        self._progress = self._clock()
        self._contact()

    def health(self) -> tuple[bool, str]:
        """(healthy, why) of the controller itself, what a restart could mend: the first list is
        done, the watch advanced within two watch periods, every worker runs, and no pod ready
        for a worker has waited past `queue_seconds`. A pod whose release keeps failing is not
        the controller's ill (a restart would fail it again, and cost every other pod): it is
        retried alone and reported (gpu_tenancy_pods_stuck, an Event on the pod), and counted
        here. The text gives counts only, never a pod's name: whoever can reach the port is not
        necessarily allowed to read the tenant's pods."""
        now = self._clock()
        if not self.synced.is_set():
            return False, "the first list of pods is not done"
        quiet = now - self._progress
        if quiet > 2 * self.watch_seconds + 30:
            return False, f"the watch has not advanced for {quiet:.0f} s"
        dead = sum(not t.is_alive() for t in self._threads)
        if dead and not self.stopping.is_set():
            return False, f"{dead} of {len(self._threads)} worker threads died"
        waited = self.queue.oldest_wait()
        if waited > self.queue_seconds:
            return False, f"the oldest pod ready for a worker has waited {waited:.0f} s ({len(self.queue)} queued)"
        stuck = len(self._stuck(now))
        if stuck:
            return True, (
                f"ok; {stuck} pod(s) still allocating after {self.stuck_seconds:g} s, each retried alone "
                "(gpu_tenancy_pods_stuck, Events on the pods)"
            )
        return True, "ok"

    def _stuck(self, now: float | None = None) -> list[Key]:
        now = self._clock() if now is None else now
        with self._lock:
            return sorted(
                k for k, e in self._pods.items() if e.since is not None and now - e.since > self.stuck_seconds
            )

    def healthy(self) -> bool:
        return self.health()[0]

    # -- what the watch sees ------------------------------------------------------------
    def observe(self, pod: Mapping[str, Any]) -> None:
        """Record the pod's newest state; queue it if it is worth handling, else forget it."""
        key = key_of(pod)
        if not (worth_handling(pod) or self._to_readmit(key, pod)):
            self.forget(key)
            return
        now = self._clock()
        with self._lock:
            entry = self._pods.get(key)
            if entry is None:
                self._pods[key] = _Pod(pod, now)
            else:
                if stage(entry.obj) != stage(pod):
                    entry.seen, entry.since, entry.evented = now, None, None
                entry.obj = pod
        self.queue.add(key)

    def _to_readmit(self, key: Key, pod: Mapping[str, Any]) -> bool:
        return key in self.readmit and rd.refused_at_admission(pod)

    def forget(self, key: Key) -> None:
        """The pod is gone or needs nothing more: drop every trace of it (its backoff too, in the
        same step, so a worker's retry of it cannot slip in between)."""
        with self._lock:
            self._pods.pop(key, None)
            self.queue.forget(key)

    def _current(self, key: Key, entry: _Pod) -> bool:
        with self._lock:
            return self._pods.get(key) is entry

    # -- one pod ------------------------------------------------------------------------
    def _tell_once(self, key: Key, entry: _Pod, what: str, message: str, level: int = logging.WARNING) -> bool:
        with self._lock:
            if entry.told == what:
                return False
            entry.told = what
        log.log(level, "%s/%s: %s", key[0], key[1], message)
        return True

    def process(self, key: Key) -> None:
        """Handle one pod in its own error boundary (a worker calls this). A pod forgotten since it
        was queued leaves nothing behind: no backoff, no retry."""
        with self._lock:
            entry = self._pods.get(key)
        if entry is None:
            self.queue.forget(key)
            return
        try:
            self.handle(entry.obj, entry.seen, entry)
        except rd.NotYet as exc:
            with self._lock:
                delay = self.queue.add_rate_limited(key) if self._pods.get(key) is entry else None
            if delay is not None:
                self._tell_once(key, entry, "readmit-waiting", f"to be made again: {exc}", logging.INFO)
        except lr.NotOurs as exc:
            with self._lock:
                entry.since = entry.evented = None
            if self._tell_once(key, entry, exc.reason, f"not ours, left alone: {exc}"):
                self.metrics.not_handled.labels(exc.reason).inc()
            self.queue.forget(key)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, lr.Refused) else f"error-{http_status(exc) or type(exc).__name__}"
            self.metrics.failures.labels("pod").inc()
            with self._lock:  # with forget() under the same lock: a deleted pod is not retried
                current = self._pods.get(key) is entry
                delay = self.queue.add_rate_limited(key) if current else None
            if delay is None:
                return
            self.metrics.retries.inc()
            first = self._tell_once(key, entry, reason, f"not released ({exc}); retrying with its own backoff")
            if first and isinstance(exc, lr.Refused):
                self.metrics.not_handled.labels(exc.reason).inc()
            log.debug("%s/%s: retry in %.2f s (%s)", key[0], key[1], delay, exc)
            self._report_if_stuck(key, entry, exc)
        else:
            self.queue.forget(key)

    def _report_if_stuck(self, key: Key, entry: _Pod, exc: BaseException) -> None:
        """A pod allocating past `stuck_seconds`: say so where its owner and the operator look (a
        Warning Event on the pod, a log line; the gauge counts it), once per spell and again every
        EVENT_EVERY_SECONDS while it lasts."""
        now = self._clock()
        with self._lock:
            if entry.since is None or now - entry.since <= self.stuck_seconds:
                return
            if entry.evented is not None and now - entry.evented < EVENT_EVERY_SECONDS:
                return
            entry.evented = now
            since, pod = entry.since, entry.obj
        node = (pod.get("spec") or {}).get("nodeName")
        message = (
            f"bound to mock-GPU node {node} and still allocating after {now - since:.0f} s: the release "
            f"controller cannot finish the allocation ({exc}); retried with this pod's own backoff"
        )
        log.warning("%s/%s: %s", key[0], key[1], message)
        self.post_event(pod, STUCK_REASON, message)

    def post_event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str = "Warning") -> bool:
        """A core/v1 Event on the pod (best effort: a failure is counted, never retried)."""
        meta = pod.get("metadata") or {}
        namespace, name = key_of(pod)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": name,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": EVENT_SOURCE},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            send(self.core.create_namespaced_event, namespace, body)
        except Exception as exc:
            self.metrics.failures.labels("event").inc()
            log.warning("%s/%s: could not post a %s Event (%s)", namespace, name, reason, exc)
            return False
        self.metrics.events.labels(reason).inc()
        return True

    def handle(self, pod: Mapping[str, Any], seen: float | None = None, entry: _Pod | None = None) -> lr.Outcome | None:
        """Release the pod if HAMi left it allocating on a node; queue a reason lookup if it
        waits unschedulable. Returns the release outcome, or None when there was nothing to do.
        Raises lr.NotOurs, lr.Refused or the API's error (the caller's boundary handles them).
        What it learns goes to `entry` (the pod's bookkeeping; a throw-away one when None)."""
        namespace, name = key = key_of(pod)
        seen = self._clock() if seen is None else seen
        entry = entry if entry is not None else _Pod(pod, seen)
        if self._to_readmit(key, pod):
            made = rd.readmit(self.core, pod)
            self._contact()
            self.metrics.readmitted.labels(made).inc()
            return None
        if allocating(pod) and not (pod.get("spec") or {}).get("nodeName"):
            freed = lr.free_lock_at_allocation(self.core, namespace, name, pod, self.node_label)
            self._contact()
            if freed == lr.LOCK_RELEASED:
                notes = lr.annotations(pod)
                with self._lock:
                    entry.freed = (notes[ha.VGPU_NODE], notes.get(ha.BIND_TIME))
                self.metrics.early.inc()
                log.debug("%s/%s: node lock freed at allocation, before the Binding", namespace, name)
            return None
        if allocating(pod):
            node = pod["spec"]["nodeName"]
            with self._lock:
                if entry.since is None:
                    entry.since = seen
                freed = entry.freed == (node, lr.annotations(pod).get(ha.BIND_TIME))
                entry.freed = None
            outcome = lr.release_pod(
                self.core, namespace, name, pod_obj=pod, node_label=self.node_label, freed_on=node if freed else None
            )
            self._contact()
            with self._lock:
                entry.since = entry.told = entry.evented = None
            self.metrics.releases.labels(outcome.status).inc()
            if outcome.status in (lr.RELEASED, lr.SUCCEEDED):
                handled = self._clock() - seen
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
                new = entry.reported != waiting
                entry.reported = waiting
            if new and not self.reasons.add(key):
                self.metrics.reasons_dropped.inc()
        return None

    def explain(self, key: Key) -> None:
        """Look up and log HAMi's reason for a Pending pod (the reason worker calls this)."""
        with self._lock:
            entry = self._pods.get(key)
        if entry is None or unschedulable(entry.obj) is None:
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
        went while the watch was down; the watch starts from the list's resourceVersion. Then
        free the locks cut releases left: best effort, so that no node (one answering 5xx, or
        refusing) can keep the controller from syncing and releasing every other pod."""
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
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.synced.set()
        self._advanced()
        log.info("listed %d pods at resourceVersion %s", len(items), self.resource_version)
        self._sweep_due = lr.finished_pods(items)
        self.sweep()

    def sweep(self) -> bool:
        """Free the locks still naming pods the last list showed finished; on any failure they
        are tried again with the next watch request. True when nothing is left to do."""
        done = self._sweep_due
        if done is None:
            return True
        try:
            lr.release_locks_of_finished(self.core, done, self.node_label)
        except Exception as exc:
            self.metrics.failures.labels("sweep").inc()
            log.warning("freeing node locks left by cut releases failed (%s); trying again with the next watch", exc)
            return False
        self._sweep_due = None
        return True

    def _watch_once(self) -> None:
        """One watch request from the last resourceVersion; returns when the server ends it."""
        if self.resource_version is None:
            self.relist()
        else:
            self.sweep()
        func = self.core.list_namespaced_pod if self.namespace else self.core.list_pod_for_all_namespaces
        args = (self.namespace,) if self.namespace else ()

        def opened(*a: Any, **kw: Any) -> Any:
            # stop() hangs up whatever response is open; one opened after it is hung up here
            # (stop sets `stopping` before it reads `_stream`, this assigns before it reads).
            resp = self._stream = func(*a, **kw)
            if self.stopping.is_set():
                _hang_up(resp)
            return resp

        self._watch = watch.Watch(return_type="object")
        if self.stopping.is_set():  # stop() came before there was a watch to stop
            return
        self.metrics.watches.inc()
        try:
            for event in self._watch.stream(
                opened,
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
            if self.stopping.is_set():  # hung up by stop()
                return
            if http_status(exc) == 410:
                log.info("resourceVersion %s expired (410 Gone): listing again", self.resource_version)
                self.resource_version = None
                return
            raise
        finally:
            self._watch = self._stream = None
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
            for t in self._threads:  # a worker inside an API call is not waited for past its share
                t.join(STOP_SECONDS / len(self._threads))

    def stop(self) -> None:
        """Stop promptly: queues shut, and the open watch hung up rather than left to wait for an
        event or the server's timeout (a quiet watch would hold run() for a whole period)."""
        self.stopping.set()
        self.queue.shutdown()
        self.reasons.shutdown()
        w = self._watch
        if w is not None:
            w.stop()
        resp = self._stream
        if resp is not None:
            _hang_up(resp)
