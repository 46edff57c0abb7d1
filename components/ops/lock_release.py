"""Finishes HAMi's allocation for pods on mock GPUs: bind-phase -> success, node lock released.

With a real device plugin, Allocate does this on the node. The mock plugin never does, so the
node keeps `hami.io/mutex.lock` and every later GPU pod on it waits for the lock to expire. This
module does what the real plugin does, and only that: on nodes labelled as mock-GPU nodes, it
releases a lock only while the lock's value names the pod, and leaves malformed or foreign
locks alone. Both the release controller (every GPU pod, watched) and the BindRelease provider
(the stack's own workloads, awaited by `pulumi up`) call `release_pod`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from components.config.names import MOCK_GPU_NODE_LABEL
from components.gpu import hami_annotations as ha
from components.ops import hami_reasons
from components.ops.kube import get_json, get_json_or_none, http_status

log = logging.getLogger("gpu-tenancy.lock-release")

# Outcomes of one release attempt.
RELEASED = "released"  # lock removed (it named this pod) and bind-phase set to success
SUCCEEDED = "succeeded"  # bind-phase success; the node lock no longer names this pod
NOT_BOUND = "not-bound"  # HAMi has not bound the pod (yet)
POD_GONE = "pod-gone"
NODE_GONE = "node-gone"
NOT_MOCK = "not-mock"  # the node's own device plugin finishes allocation: not ours to touch
FAILED = "failed"  # HAMi marked the allocation failed
CONFLICT_RETRIES = 8

# Lock results.
LOCK_RELEASED = "released"
LOCK_NOT_HELD = "not-held"
LOCK_MALFORMED = "malformed"
LOCK_NODE_GONE = "node-gone"

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Outcome:
    status: str
    node: str | None = None
    detail: str = ""


def annotations(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_mock_node(node: Obj, label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL) -> bool:
    """Whether the node's GPUs are fake (labelled by the inventory); None = every node is."""
    if label is None:
        return True
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(label[0]) == label[1]


def release_node_lock(core: Any, node: str, namespace: str, pod: str, node_obj: Obj | None = None) -> str:
    """Remove the node lock if, and only while, it names namespace/pod.

    The delete carries the node's resourceVersion, so a lock taken by someone else between our
    read and our write makes the API server answer 409 and we look again.
    Returns one of LOCK_RELEASED, LOCK_NOT_HELD (absent or another pod's), LOCK_MALFORMED,
    LOCK_NODE_GONE.
    """
    for attempt in range(CONFLICT_RETRIES):
        if node_obj is None or attempt:
            node_obj = get_json_or_none(core.read_node, node)
            if node_obj is None:
                return LOCK_NODE_GONE
        value = annotations(node_obj).get(ha.NODE_LOCK)
        if value is None:
            return LOCK_NOT_HELD
        try:
            held = ha.lock_held_by(value, namespace, pod)
        except ha.AnnotationFormatError as exc:
            log.warning("node %s: leaving malformed %s=%r alone (%s)", node, ha.NODE_LOCK, value, exc)
            return LOCK_MALFORMED
        if not held:
            return LOCK_NOT_HELD
        rv = node_obj["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": rv, "annotations": {ha.NODE_LOCK: None}}}
        try:
            core.patch_node(node, patch, _preload_content=False)
            return LOCK_RELEASED
        except Exception as exc:
            if http_status(exc) == 409:
                continue
            if http_status(exc) == 404:
                return LOCK_NODE_GONE
            raise
    raise RuntimeError(f"node {node}: lock still contended after {CONFLICT_RETRIES} attempts")


def free_lock_at_allocation(
    core: Any, namespace: str, pod: str, pod_obj: Obj, node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL
) -> str | None:
    """Free the node lock as soon as HAMi's Bind has taken it and marked the pod allocating,
    before the Binding lands: on a mock-GPU node the lock guards nothing (the mock's Allocate
    does nothing), and every GPU pod whose Bind meets it would back off for a second or more.
    Still only the pod's own lock, resourceVersion-guarded. None when there is nothing to do."""
    node = annotations(pod_obj).get(ha.VGPU_NODE)
    if not node or (pod_obj.get("spec") or {}).get("nodeName"):
        return None
    node_obj = get_json_or_none(core.read_node, node)
    if node_obj is None:
        return LOCK_NODE_GONE
    if not is_mock_node(node_obj, node_label):
        return None
    return release_node_lock(core, node, namespace, pod, node_obj)


def release_pod(
    core: Any,
    namespace: str,
    pod: str,
    pod_obj: Obj | None = None,
    node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
) -> Outcome:
    """One idempotent pass over one pod: what the real device plugin does after Allocate.

    `pod_obj` (e.g. from a watch event) saves the first read; a conflict re-reads the pod.
    """
    released = False
    for attempt in range(CONFLICT_RETRIES):
        if pod_obj is None or attempt:
            pod_obj = get_json_or_none(core.read_namespaced_pod, pod, namespace)
            if pod_obj is None:
                return Outcome(POD_GONE)
        phase = annotations(pod_obj).get(ha.BIND_PHASE)
        # Bound = HAMi's Bind patched bind-phase and then created the Binding (spec.nodeName).
        node = (pod_obj.get("spec") or {}).get("nodeName")
        if phase == ha.PHASE_FAILED:
            return Outcome(FAILED, node, "HAMi marked the allocation failed (bind-phase failed)")
        if phase not in (ha.PHASE_ALLOCATING, ha.PHASE_SUCCESS) or not node:
            return Outcome(NOT_BOUND, node)
        node_obj = get_json_or_none(core.read_node, node)
        if node_obj is None:
            return Outcome(NODE_GONE, node, f"node {node} no longer exists")
        if not is_mock_node(node_obj, node_label):
            return Outcome(NOT_MOCK, node, f"node {node} is not labelled {'='.join(node_label or ())}")
        # The lock first: the next GPU pod on the node waits for it, not for bind-phase. A crash
        # between the two writes leaves the pod allocating with no lock: the next pass finishes it.
        lock = release_node_lock(core, node, namespace, pod, node_obj)
        released = released or lock == LOCK_RELEASED
        if lock == LOCK_NODE_GONE:
            return Outcome(NODE_GONE, node, f"node {node} no longer exists")
        if phase == ha.PHASE_ALLOCATING:
            rv = pod_obj["metadata"]["resourceVersion"]
            patch = {"metadata": {"resourceVersion": rv, "annotations": {ha.BIND_PHASE: ha.PHASE_SUCCESS}}}
            try:
                core.patch_namespaced_pod(pod, namespace, patch, _preload_content=False)
            except Exception as exc:
                if http_status(exc) == 409:
                    continue
                if http_status(exc) == 404:
                    return Outcome(POD_GONE, node)
                raise
        if released:
            return Outcome(RELEASED, node)
        return Outcome(SUCCEEDED, node, "" if lock == LOCK_NOT_HELD else f"lock on {node} is {lock}")
    raise RuntimeError(f"pod {namespace}/{pod}: still conflicting after {CONFLICT_RETRIES} attempts")


def release_orphaned_locks(core: Any, pods: list[Obj], node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL) -> int:
    """Locks still naming a pod whose bind-phase is already success (a release interrupted
    between its two writes): removed, as the device plugin would have. Returns how many."""
    done = {
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in pods
        if annotations(p).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
    }
    released = 0
    for node in get_json(core.list_node).get("items", []):
        value = annotations(node).get(ha.NODE_LOCK)
        if value is None or not is_mock_node(node, node_label):
            continue
        try:
            lock = ha.decode_node_lock(value)
        except ha.AnnotationFormatError:
            continue
        if (lock.namespace, lock.pod) in done:
            name = node["metadata"]["name"]
            if release_node_lock(core, name, lock.namespace, lock.pod, node) == LOCK_RELEASED:
                log.info(
                    "node %s: released the lock of %s/%s (its bind-phase was already success)",
                    name,
                    lock.namespace,
                    lock.pod,
                )
                released += 1
    return released


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
    node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PodResult]:
    """Release every pod of a workload as HAMi binds it, one after another on a shared card.

    Pods are given by name, or by label selector plus the number expected (a Deployment's
    pods appear over time). Returns when every pod has an outcome other than NOT_BOUND, or at
    the deadline, with HAMi's reason for each pod still unbound.
    """
    deadline = clock() + timeout
    finished: dict[str, Outcome] = {}
    while True:
        if names is not None:
            current = list(names)
        else:
            listed = get_json(core.list_namespaced_pod, namespace, label_selector=selector).get("items", [])
            current = sorted(p["metadata"]["name"] for p in listed if not p["metadata"].get("deletionTimestamp"))
        for pod in current:
            if pod not in finished:
                outcome = release_pod(core, namespace, pod, node_label=node_label)
                if outcome.status != NOT_BOUND:
                    finished[pod] = outcome
        pending = [p for p in current if p not in finished]
        enough = names is not None or len(current) >= count
        if not pending and enough:
            return [PodResult(p, finished[p]) for p in current]
        if clock() >= deadline:
            results = [PodResult(p, finished[p]) for p in current if p in finished]
            results += [
                PodResult(p, Outcome(NOT_BOUND, None, hami_reasons.pending_reason(core, namespace, p).text))
                for p in pending
            ]
            if not enough:
                results.append(PodResult("", Outcome(NOT_BOUND, None, f"{len(current)} of {count} pods exist")))
            return results
        sleep(interval)
