"""The release controller: finishes HAMi's allocation for every GPU pod on mock-GPU nodes.

The mock device plugin never does what a real one does after Allocate, so without this every
GPU pod after the first on a node waits out HAMi's node lock (5 minutes). The controller
watches pods with the Kubernetes watch API, and for each pod HAMi leaves in
`hami.io/bind-phase: allocating` it calls `lock_release.release_pod` (owner-checked,
resourceVersion-guarded) - for pods the stack declares and for those it does not.

Robustness: it lists once, then watches from the list's resourceVersion and resumes from the
last one it saw after a dropped watch or an API-server restart; on `410 Gone` it lists again
(handling every pod already allocating); errors back off exponentially with jitter (tenacity).
Observability: each release is logged with its delay since HAMi's bind time; `/metrics`
(prometheus_client), `/healthz` and `/readyz` are served on a small HTTP port.

No Pulumi import: the lab runs it in a container per tenant (`--kubeconfig` a file the stack
uploads), and `python -m components.ops.release_controller` runs it anywhere else.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tenacity
from kubernetes import watch
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from components.config.names import MOCK_GPU_NODE_LABEL
from components.gpu import hami_annotations as ha
from components.ops import hami_reasons
from components.ops import lock_release as lr
from components.ops.kube import REQUEST_TIMEOUT, core_api, get_json, http_status

log = logging.getLogger("gpu-tenancy.release-controller")

DEFAULT_PORT = 9400
# Seconds one watch request stays open before the server ends it and we resume.
WATCH_SECONDS = 60
BACKOFF_MAX_SECONDS = 10.0

# What the controller needs in a tenant, and nothing more (a ServiceAccount's ClusterRole).
RBAC_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
)

DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


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


def _bind_delay(pod: Mapping[str, Any], now: float) -> float | None:
    value = lr.annotations(pod).get(ha.BIND_TIME)
    try:
        return max(0.0, now - int(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    """The PodScheduled=False condition's message of a pod HAMi schedules, if any."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or spec.get("schedulerName") != ha.SCHEDULER_NAME:
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('lastTransitionTime')}|{cond.get('message')}"
    return None


class ReleaseController:
    """List, then watch pods; release each one HAMi leaves allocating on a mock-GPU node."""

    def __init__(
        self,
        core: Any,
        *,
        namespace: str | None = None,
        node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
        metrics: Metrics | None = None,
        watch_seconds: int = WATCH_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
    ):
        self.core = core
        self.namespace = namespace
        self.node_label = node_label
        self.metrics = metrics or Metrics()
        self.watch_seconds = watch_seconds
        self.backoff_max = backoff_max
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self._last_contact = 0.0
        self._reported: dict[tuple[str, str], str] = {}
        self._watch: watch.Watch | None = None

    # -- health -------------------------------------------------------------------------
    def _contact(self) -> None:
        self._last_contact = time.monotonic()
        self.metrics.last_contact.set_to_current_time()

    def healthy(self) -> bool:
        """Synced once, and the API server answered within two watch periods."""
        limit = 2 * self.watch_seconds + 30
        return self.synced.is_set() and time.monotonic() - self._last_contact < limit

    # -- one pod ------------------------------------------------------------------------
    def handle(self, pod: Mapping[str, Any]) -> lr.Outcome | None:
        """Release the pod if HAMi left it allocating on a node; report HAMi's reason if it
        waits unschedulable. Returns the release outcome, or None when there was nothing to do."""
        phase = lr.annotations(pod).get(ha.BIND_PHASE)
        namespace, name = _key(pod)
        if phase == ha.PHASE_ALLOCATING and not (pod.get("spec") or {}).get("nodeName"):
            freed = lr.free_lock_at_allocation(self.core, namespace, name, pod, self.node_label)
            self._contact()
            if freed == lr.LOCK_RELEASED:
                self.metrics.early.inc()
                log.debug("%s/%s: node lock freed at allocation, before the Binding", namespace, name)
            return None
        if phase == ha.PHASE_ALLOCATING:
            seen = time.monotonic()
            outcome = lr.release_pod(self.core, namespace, name, pod_obj=pod, node_label=self.node_label)
            self._contact()
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
            self._reported.pop((namespace, name), None)
            return outcome
        waiting = _unschedulable(pod)
        if waiting is not None and self._reported.get((namespace, name)) != waiting:
            self._reported[(namespace, name)] = waiting
            reason = hami_reasons.pending_reason(self.core, namespace, name)
            log.warning("%s/%s is Pending: %s", namespace, name, reason.text)
        return None

    # -- list and watch -----------------------------------------------------------------
    def _list(self) -> dict[str, Any]:
        if self.namespace:
            return get_json(self.core.list_namespaced_pod, self.namespace)
        return get_json(self.core.list_pod_for_all_namespaces)

    def relist(self) -> None:
        """Handle every pod as it is now (those already allocating included); remember where
        the list stands so the watch starts from there."""
        listed = self._list()
        self._contact()
        self.metrics.relists.inc()
        items = listed.get("items", [])
        for pod in items:
            self.handle(pod)
        lr.release_orphaned_locks(self.core, items, self.node_label)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.synced.set()
        log.info("listed %d pods at resourceVersion %s", len(items), self.resource_version)

    def _watch_once(self) -> None:
        """One watch request from the last resourceVersion; returns when the server ends it."""
        if self.resource_version is None:
            self.relist()
        func = self.core.list_namespaced_pod if self.namespace else self.core.list_pod_for_all_namespaces
        args = (self.namespace,) if self.namespace else ()
        self._watch = watch.Watch(return_type="object")
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
                self._contact()
                obj = event["raw_object"]
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.handle(obj)
                elif event["type"] == "DELETED":
                    self._reported.pop(_key(obj), None)
                if version:
                    self.resource_version = version
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
        self._contact()

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
        """Until stop(): watch, resume, re-list on 410, back off on errors."""
        retrying = tenacity.Retrying(
            wait=tenacity.wait_exponential_jitter(multiplier=0.2, max=self.backoff_max, jitter=0.5),
            stop=lambda _state: self.stopping.is_set(),
            sleep=self.stopping.wait,
            before_sleep=self._on_error,
            retry=tenacity.retry_if_exception_type(Exception),
            reraise=False,
        )
        while not self.stopping.is_set():
            try:
                retrying(self._watch_once)
            except tenacity.RetryError:
                return

    def stop(self) -> None:
        self.stopping.set()
        w = self._watch
        if w is not None:
            w.stop()


def serve_http(controller: ReleaseController, host: str, port: int) -> ThreadingHTTPServer:
    """/metrics, /healthz (API answered recently) and /readyz (first list done), in a thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(controller.metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                ok = controller.healthy()
                body, ctype, code = (b"ok\n" if ok else b"no recent API contact\n"), "text/plain", 200 if ok else 503
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
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    with open(args.kubeconfig) as f:
        core = core_api(f.read())
    controller = ReleaseController(
        core, namespace=args.namespace, node_label=None if args.any_node else args.node_selector
    )
    if args.once:
        controller.relist()
        return 0
    host, _, port = args.listen.rpartition(":")
    server = serve_http(controller, host or "0.0.0.0", int(port))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    log.info("release controller: metrics and health on http://%s:%s", host, port)
    controller.run()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
