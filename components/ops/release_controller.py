"""The release controller: finishes HAMi's allocation for every GPU pod on mock-GPU nodes.

The mock device plugin never does what a real one does after Allocate, so without this every
GPU pod after the first on a node waits out HAMi's node lock (5 minutes). The controller
watches pods with the Kubernetes watch API, and for each pod HAMi leaves in
`hami.io/bind-phase: allocating` it calls `lock_release.release_pod` (owner-checked,
resourceVersion-guarded) - for pods the stack declares and for those it does not.

Nothing one pod carries can stop it (controller-runtime's model):
- the watch only records what it sees (the pods worth handling, by key) and always advances;
- workers take keys from a de-duplicating work queue; each pod is handled in its own error
  boundary, and a pod whose handling fails comes back after a backoff of its own while every
  other pod goes on;
- a pod whose annotations name a node that cannot be acted on (no Node can have that name,
  or the API server answers 4xx on it) is "not ours": logged once, counted in
  `gpu_tenancy_pods_not_handled_total`, left until the pod changes;
- HAMi's reasons for Pending pods are looked up by a worker of their own from a bounded,
  de-duplicated queue, off the release path; bookkeeping goes with the pod.
`/healthz` is unhealthy when the controller stops making progress (the watch has not advanced
for two watch periods, a worker died, or a pod bound to a mock node is still allocating after
`stuck_seconds`); with `--exit-when-unhealthy` the process exits then, so the lab's container
is restarted. `/readyz` answers once the first list is done. `/metrics` is prometheus_client's.

No Pulumi import: the lab runs it in a container per tenant (`--kubeconfig` a file the stack
uploads, its bound token kept renewed with `--token-file`), and
`python -m components.ops.release_controller` runs it anywhere else.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tenacity
from kubernetes import watch
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from components.config.names import MOCK_GPU_NODE_LABEL
from components.gpu import hami_annotations as ha
from components.ops import hami_reasons
from components.ops import lock_release as lr
from components.ops.bound_token import TokenExpiredError, TokenKeeper
from components.ops.kube import REQUEST_TIMEOUT, core_api, get_json, http_status
from components.ops.workqueue import WorkQueue

log = logging.getLogger("gpu-tenancy.release-controller")

DEFAULT_PORT = 9400
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

# What the controller needs in a tenant, and nothing more (a ServiceAccount's ClusterRole);
# what it may write with it is narrowed further by an admission policy (release_writes).
RBAC_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
)

DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)

Key = tuple[str, str]


class Metrics:
    """The controller's Prometheus metrics, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.releases = Counter(
            "gpu_tenancy_releases", "Release attempts that finished, by outcome.", ["outcome"], registry=r
        )
        self.failures = Counter(
            "gpu_tenancy_release_failures", "Releases or API calls that failed, by kind.", ["kind"], registry=r
        )
        self.not_handled = Counter(
            "gpu_tenancy_pods_not_handled",
            "Pods left alone or refused, once per pod and reason (invalid-node-name, node-<status>, refused-<status>).",
            ["reason"],
            registry=r,
        )
        self.retries = Counter("gpu_tenancy_pod_retries", "Pods queued again after their own backoff.", registry=r)
        self.delay = Histogram(
            "gpu_tenancy_release_delay_seconds",
            "Seconds from HAMi's bind time (hami.io/bind-time, whole seconds) to the release.",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.handling = Histogram(
            "gpu_tenancy_release_handling_seconds",
            "Seconds from the watch event showing the pod allocating to its release.",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.early = Counter(
            "gpu_tenancy_locks_freed_at_allocation",
            "Node locks freed when HAMi marked the pod allocating, before its Binding landed.",
            registry=r,
        )
        self.relists = Counter("gpu_tenancy_relists", "Full lists of pods (start, 410 Gone, errors).", registry=r)
        self.watches = Counter("gpu_tenancy_watch_sessions", "Watch requests opened.", registry=r)
        self.last_contact = Gauge(
            "gpu_tenancy_last_api_contact_timestamp_seconds", "When the API server last answered.", registry=r
        )
        self.queue_depth = Gauge("gpu_tenancy_queue_depth", "Pods waiting for a worker.", registry=r)
        self.stuck = Gauge(
            "gpu_tenancy_pods_stuck", "Pods bound to a mock node and still allocating past the bound.", registry=r
        )
        self.reasons_dropped = Counter(
            "gpu_tenancy_reason_lookups_dropped", "Pending-reason lookups dropped: their queue was full.", registry=r
        )


def _bind_delay(pod: Mapping[str, Any], now: float) -> float | None:
    value = lr.annotations(pod).get(ha.BIND_TIME)
    try:
        return max(0.0, now - int(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _key(pod: Mapping[str, Any]) -> Key:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    """The PodScheduled=False condition's message of a pod HAMi schedules, if any."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or spec.get("schedulerName") != ha.SCHEDULER_NAME:
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('lastTransitionTime')}|{cond.get('message')}"
    return None


def _allocating(pod: Mapping[str, Any]) -> bool:
    return lr.annotations(pod).get(ha.BIND_PHASE) == ha.PHASE_ALLOCATING


def _stage(pod: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Allocating or not, and the node it is bound to: the handling clock restarts when it changes."""
    return _allocating(pod), (pod.get("spec") or {}).get("nodeName")


def _worth_handling(pod: Mapping[str, Any]) -> bool:
    """Only these pods are kept and queued: HAMi left them allocating, or they wait unscheduled."""
    return _allocating(pod) or _unschedulable(pod) is not None


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
        key = _key(pod)
        if not _worth_handling(pod):
            self.forget(key)
            return
        with self._lock:
            old = self._pods.get(key)
            same = old is not None and _stage(old[0]) == _stage(pod)
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
        namespace, name = key = _key(pod)
        seen = time.monotonic() if seen is None else seen
        if _allocating(pod) and not (pod.get("spec") or {}).get("nodeName"):
            freed = lr.free_lock_at_allocation(self.core, namespace, name, pod, self.node_label)
            self._contact()
            if freed == lr.LOCK_RELEASED:
                with self._lock:
                    notes = lr.annotations(pod)
                    self._freed[key] = (notes[ha.VGPU_NODE], notes.get(ha.BIND_TIME))
                self.metrics.early.inc()
                log.debug("%s/%s: node lock freed at allocation, before the Binding", namespace, name)
            return None
        if _allocating(pod):
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
                delay = _bind_delay(pod, time.time())
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
        waiting = _unschedulable(pod)
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
        if entry is None or _unschedulable(entry[0]) is None:
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
        present = {_key(p) for p in items}
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
                    self.forget(_key(obj))
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


def serve_http(controller: ReleaseController, host: str, port: int) -> ThreadingHTTPServer:
    """/metrics, /healthz (making progress) and /readyz (first list done), in a thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(controller.metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                ok, why = controller.health()
                body, ctype, code = f"{why}\n".encode(), "text/plain", 200 if ok else 503
            elif self.path.startswith("/readyz"):
                ok = controller.synced.is_set()
                body, ctype, code = (b"ok\n" if ok else b"not synced\n"), "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="release-controller-http", daemon=True).start()
    return server


def exit_when_unhealthy(controller: ReleaseController, grace: float, interval: float = 5.0) -> threading.Thread:
    """Exit the process once the controller has been unhealthy for `grace` seconds, so that
    whatever runs it (Docker's restart policy in the lab) starts a fresh one."""

    def watchdog() -> None:
        bad_since: float | None = None
        while not controller.stopping.wait(interval):
            ok, why = controller.health()
            if ok or not controller.synced.is_set():
                bad_since = None
                continue
            bad_since = bad_since or time.monotonic()
            if time.monotonic() - bad_since >= grace:
                log.error("unhealthy for %.0f s (%s): exiting so that it is restarted", grace, why)
                logging.shutdown()
                os._exit(3)

    thread = threading.Thread(target=watchdog, name="watchdog", daemon=True)
    thread.start()
    return thread


def keep_token(keeper: TokenKeeper, controller: ReleaseController) -> None:
    """Renew the controller's token until it stops; with every token expired, stop it (exit)."""
    try:
        keeper.run(controller.stopping)
    except TokenExpiredError as exc:
        log.error("%s", exc)
        controller.stop()


def _label(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected LABEL=VALUE, got {value!r}")
    return key, val


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.ops.release_controller",
        description="Finish HAMi's allocation for GPU pods on mock-GPU nodes (what a real device plugin does).",
    )
    parser.add_argument("--kubeconfig", required=True, help="path of the tenant's kubeconfig")
    parser.add_argument("--namespace", help="only pods in this namespace (default: all)")
    parser.add_argument(
        "--node-selector",
        type=_label,
        default=MOCK_GPU_NODE_LABEL,
        metavar="LABEL=VALUE",
        help="release only on nodes with this label (default %(default)s, what the stack's inventory sets)",
    )
    parser.add_argument("--any-node", action="store_true", help="release on every node (a cluster of mock GPUs only)")
    parser.add_argument("--listen", default=f"127.0.0.1:{DEFAULT_PORT}", help="HOST:PORT for /metrics and /healthz")
    parser.add_argument("--once", action="store_true", help="one pass over the pods as they are now, then exit")
    parser.add_argument("--workers", type=int, default=WORKERS, help="pods handled at once (default %(default)s)")
    parser.add_argument(
        "--stuck-seconds",
        type=float,
        default=STUCK_SECONDS,
        help="unhealthy when a pod bound to a mock node is still allocating after this (default %(default)s)",
    )
    parser.add_argument(
        "--exit-when-unhealthy",
        type=float,
        metavar="SECONDS",
        help="exit (code 3) once /healthz has failed this long, so a supervisor restarts the controller",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="keep the kubeconfig's bound token renewed in this file and use it (components.ops.bound_token)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    with open(args.kubeconfig) as f:
        kubeconfig = f.read()
    keeper = TokenKeeper(kubeconfig, args.token_file) if args.token_file else None
    if keeper is not None:
        try:
            keeper.renew_if_due()
        except TokenExpiredError as exc:
            log.error("%s", exc)
            return 2
    core = core_api(kubeconfig, connections=args.workers + 2, token=keeper.current if keeper else None)
    controller = ReleaseController(
        core,
        namespace=args.namespace,
        node_label=None if args.any_node else args.node_selector,
        workers=args.workers,
        stuck_seconds=args.stuck_seconds,
    )
    if args.once:
        controller.relist()
        controller.drain()
        return 0
    host, _, port = args.listen.rpartition(":")
    server = serve_http(controller, host or "0.0.0.0", int(port))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    if args.exit_when_unhealthy is not None:
        exit_when_unhealthy(controller, args.exit_when_unhealthy)
    if keeper is not None:
        threading.Thread(target=keep_token, args=(keeper, controller), name="token", daemon=True).start()
    log.info("release controller: metrics and health on http://%s:%s", host, port)
    controller.run()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
