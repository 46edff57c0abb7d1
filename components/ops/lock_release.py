"""Finishes HAMi's allocation for pods on mock GPUs: bind-phase -> success, node lock released.

With a real device plugin, Allocate does this on the node. The mock plugin never does, so the
node keeps `hami.io/mutex.lock` and every later GPU pod on it waits for the lock to expire. This
module does what the real plugin does, and only that: it releases a lock only while the lock's
value names the pod, and leaves malformed or foreign locks alone. No Pulumi import: the
BindRelease dynamic provider uses it, and `python -m components.ops.lock_release` runs it as a loop
for pods the stack does not manage.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.gpu import hami_annotations as ha
from components.ops.kube import core_api, http_status

log = logging.getLogger("gpu-tenancy.lock-release")

# Outcomes of one release attempt.
RELEASED = "released"  # lock removed (it named this pod) and bind-phase set to success
SUCCEEDED = "succeeded"  # bind-phase success; the node lock no longer names this pod
NOT_BOUND = "not-bound"  # HAMi has not bound the pod (yet)
POD_GONE = "pod-gone"
NODE_GONE = "node-gone"
FAILED = "failed"  # HAMi marked the allocation failed
CONFLICT_RETRIES = 8
# kube-scheduler's and HAMi's event reasons for a pod that does not fit.
SCHEDULING_FAILURES = ("FailedScheduling", "FilteringFailed")


@dataclass(frozen=True)
class Outcome:
    status: str
    node: str | None = None
    detail: str = ""


def release_node_lock(core: Any, node: str, namespace: str, pod: str) -> str:
    """Remove the node lock if, and only while, it names namespace/pod.

    The delete carries the node's resourceVersion, so a lock taken by someone else between our
    read and our write makes the API server answer 409 and we look again.
    Returns "released", "not-held" (absent or another pod's), "malformed" or "node-gone".
    """
    for _ in range(CONFLICT_RETRIES):
        try:
            obj = core.read_node(node)
        except Exception as exc:
            if http_status(exc) == 404:
                return "node-gone"
            raise
        value = (obj.metadata.annotations or {}).get(ha.NODE_LOCK)
        if value is None:
            return "not-held"
        try:
            held = ha.lock_held_by(value, namespace, pod)
        except ha.AnnotationFormatError as exc:
            log.warning("node %s: leaving malformed %s=%r alone (%s)", node, ha.NODE_LOCK, value, exc)
            return "malformed"
        if not held:
            return "not-held"
        patch = {"metadata": {"resourceVersion": obj.metadata.resource_version, "annotations": {ha.NODE_LOCK: None}}}
        try:
            core.patch_node(node, patch)
            return "released"
        except Exception as exc:
            if http_status(exc) == 409:
                continue
            if http_status(exc) == 404:
                return "node-gone"
            raise
    raise RuntimeError(f"node {node}: lock still contended after {CONFLICT_RETRIES} attempts")


def _set_phase(core: Any, namespace: str, pod: str, resource_version: str) -> bool:
    """bind-phase -> success, guarded by the pod's resourceVersion; False on a conflict."""
    patch = {"metadata": {"resourceVersion": resource_version, "annotations": {ha.BIND_PHASE: ha.PHASE_SUCCESS}}}
    try:
        core.patch_namespaced_pod(pod, namespace, patch)
        return True
    except Exception as exc:
        if http_status(exc) == 409:
            return False
        raise


def release_pod(core: Any, namespace: str, pod: str) -> Outcome:
    """One idempotent pass over one pod: what the real device plugin does after Allocate."""
    for _ in range(CONFLICT_RETRIES):
        try:
            obj = core.read_namespaced_pod(pod, namespace)
        except Exception as exc:
            if http_status(exc) == 404:
                return Outcome(POD_GONE)
            raise
        ann = obj.metadata.annotations or {}
        phase = ann.get(ha.BIND_PHASE)
        # Bound = HAMi's Bind patched bind-phase and then created the Binding (spec.nodeName).
        node = obj.spec.node_name
        if phase == ha.PHASE_FAILED:
            return Outcome(FAILED, node, "HAMi marked the allocation failed")
        if phase not in (ha.PHASE_ALLOCATING, ha.PHASE_SUCCESS) or not node:
            return Outcome(NOT_BOUND, node)
        if phase == ha.PHASE_ALLOCATING and not _set_phase(core, namespace, pod, obj.metadata.resource_version):
            continue
        lock = release_node_lock(core, node, namespace, pod)
        if lock == "node-gone":
            return Outcome(NODE_GONE, node, f"node {node} no longer exists")
        if lock == "released":
            return Outcome(RELEASED, node)
        return Outcome(SUCCEEDED, node, "" if lock == "not-held" else f"lock on {node} is {lock}")
    raise RuntimeError(f"pod {namespace}/{pod}: still conflicting after {CONFLICT_RETRIES} attempts")


def scheduling_reason(core: Any, namespace: str, pod: str) -> str:
    """Why a pod is still Pending, in the scheduler's (and HAMi's) own words."""
    parts = []
    try:
        obj = core.read_namespaced_pod(pod, namespace)
        for cond in obj.status.conditions or []:
            if cond.type == "PodScheduled" and cond.status == "False" and cond.message:
                parts.append(cond.message)
    except Exception as exc:
        if http_status(exc) != 404:
            raise
        return "pod no longer exists"
    try:
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}")
        warnings = [
            e for e in events.items if e.type == "Warning" and e.reason in ("FailedScheduling", "FilteringFailed")
        ]
        warnings.sort(key=lambda e: str(e.last_timestamp or e.event_time or e.metadata.creation_timestamp))
        if warnings and warnings[-1].message not in parts:
            parts.append(warnings[-1].message)
    except Exception as exc:  # events are best effort: a missing reason must not hide the timeout
        log.debug("events for %s/%s unavailable: %s", namespace, pod, exc)
    return "; ".join(parts) or "no scheduling event yet"


@dataclass(frozen=True)
class PodResult:
    name: str
    outcome: Outcome


def wait_and_release_pods(
    core: Any,
    namespace: str,
    timeout: float,
    names: list[str] | None = None,
    selector: str | None = None,
    count: int = 0,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PodResult]:
    """Release every pod of a workload as HAMi binds it, one after another on a shared card.

    Pods are given by name, or by label selector plus the number expected (a Deployment's
    pods appear over time). Returns when every pod has an outcome other than NOT_BOUND, or at
    the deadline, with the scheduler's reason for each pod still unbound.
    """
    deadline = clock() + timeout
    finished: dict[str, Outcome] = {}
    while True:
        if names is not None:
            current = list(names)
        else:
            listed = core.list_namespaced_pod(namespace, label_selector=selector).items
            current = sorted(p.metadata.name for p in listed if p.metadata.deletion_timestamp is None)
        for pod in current:
            if pod not in finished:
                outcome = release_pod(core, namespace, pod)
                if outcome.status != NOT_BOUND:
                    finished[pod] = outcome
        pending = [p for p in current if p not in finished]
        enough = names is not None or len(current) >= count
        if not pending and enough:
            return [PodResult(p, finished[p]) for p in current]
        if clock() >= deadline:
            results = [PodResult(p, finished[p]) for p in current if p in finished]
            results += [PodResult(p, Outcome(NOT_BOUND, None, scheduling_reason(core, namespace, p))) for p in pending]
            if not enough:
                results.append(PodResult("", Outcome(NOT_BOUND, None, f"{len(current)} of {count} pods exist")))
            return results
        sleep(interval)


def release_all(core: Any, namespace: str | None = None) -> list[tuple[str, str, Outcome]]:
    """One pass over every pod HAMi left in bind-phase allocating (optionally in one namespace)."""
    pods = core.list_namespaced_pod(namespace) if namespace else core.list_pod_for_all_namespaces()
    done = []
    for p in pods.items:
        if (p.metadata.annotations or {}).get(ha.BIND_PHASE) == ha.PHASE_ALLOCATING:
            outcome = release_pod(core, p.metadata.namespace, p.metadata.name)
            done.append((p.metadata.namespace, p.metadata.name, outcome))
            log.info("%s/%s: %s %s", p.metadata.namespace, p.metadata.name, outcome.status, outcome.detail)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.ops.lock_release",
        description="Release HAMi node locks held by pods on mock GPUs (what the real device plugin does).",
    )
    parser.add_argument("--kubeconfig", required=True, help="path of the tenant's kubeconfig")
    parser.add_argument("--namespace", help="only pods in this namespace (default: all)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between passes (default 2)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    with open(args.kubeconfig) as f:
        core = core_api(f.read())
    while True:
        release_all(core, args.namespace)
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
