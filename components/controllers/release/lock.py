"""Finishes HAMi's allocation for pods on mock GPUs: bind-phase -> success, node lock released.

With a real device plugin, Allocate does this on the node. The mock plugin never does, so the
node keeps `hami.io/mutex.lock` and every later GPU pod on it waits for the lock to expire. This
module does what the real plugin does, and only that: on nodes labelled as mock-GPU nodes, it
releases a lock only while the lock's value names the pod, and leaves malformed or foreign
locks alone. The release controller (every GPU pod, watched) is the one writer: it calls
`release_pod`. The ReleaseWait provider only reads (components.lifecycle.release_wait).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.domain import hami_annotations as ha
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.kube.client import get_json, get_json_or_none, http_status, send
from components.kube.waiting import retry_on_conflict

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

log = logging.getLogger("gpu-tenancy.lock-release")

# Outcomes of one release attempt.
RELEASED = "released"  # lock removed (it named this pod) and bind-phase set to success
SUCCEEDED = "succeeded"  # bind-phase success; the node lock no longer names this pod
NOT_BOUND = "not-bound"  # HAMi has not bound the pod (yet)
POD_GONE = "pod-gone"
NODE_GONE = "node-gone"
NOT_MOCK = "not-mock"  # the node's own device plugin finishes allocation: not ours to touch
FAILED = "failed"  # HAMi marked the allocation failed

# Lock results.
LOCK_RELEASED = "released"
LOCK_NOT_HELD = "not-held"
LOCK_MALFORMED = "malformed"
LOCK_NODE_GONE = "node-gone"

Obj = Mapping[str, Any]

# What the API server accepts as a Node's name (a DNS-1123 subdomain).
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NODE_NAME = 253


class NotOurs(Exception):
    """A pod names a node this controller cannot act on: a name no Node can have, or one the
    API server refuses to read (4xx). Nothing to retry until the pod changes."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class Refused(Exception):
    """The API server refused one of our writes with a 4xx other than 404/409 (an admission
    policy, RBAC, validation): retried with the pod's own backoff, never blocking another pod."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.reason = f"refused-{status}"


def read_named_node(core: CoreV1Api, node: str) -> dict[str, Any] | None:
    """The node a pod names, or None when no such node exists. Raises NotOurs for a name no
    Node can carry (checked before any request: `a%b` or `n/status` would reach other URLs)
    and for a 4xx the API server answers on it."""
    if len(node) > MAX_NODE_NAME or not _NODE_NAME.match(node):
        raise NotOurs("invalid-node-name", f"{node!r} is not a Node name")
    try:
        return get_json_or_none(core.read_node, node)
    except Exception as exc:
        status = http_status(exc)
        if status is not None and 400 <= status < 500 and status != 429:
            raise NotOurs(f"node-{status}", f"reading node {node!r}: HTTP {status}") from exc
        raise


def refusal(exc: BaseException, what: str) -> Refused | None:
    status = http_status(exc)
    if status is not None and 400 <= status < 500 and status not in (404, 409, 429):
        return Refused(status, f"{what}: HTTP {status} {getattr(exc, 'reason', '')}".rstrip())
    return None


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


def release_node_lock(core: CoreV1Api, node: str, namespace: str, pod: str, node_obj: Obj | None = None) -> str:
    """Remove the node lock if, and only while, it names namespace/pod.

    The delete carries the node's resourceVersion, so a lock taken by someone else between our
    read and our write makes the API server answer 409 and we look again (retry_on_conflict).
    Returns one of LOCK_RELEASED, LOCK_NOT_HELD (absent or another pod's), LOCK_MALFORMED,
    LOCK_NODE_GONE.
    """
    given = [node_obj] if node_obj is not None else []

    def attempt() -> str:
        # The caller's read first; after a conflict, a fresh one.
        node_obj = given.pop() if given else read_named_node(core, node)
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
            send(core.patch_node, node, patch)
            return LOCK_RELEASED
        except Exception as exc:
            if http_status(exc) == 404:
                return LOCK_NODE_GONE
            if refused := refusal(exc, f"removing the lock of node {node}"):
                raise refused from exc
            raise

    return retry_on_conflict(attempt)


def free_lock_at_allocation(
    core: CoreV1Api, namespace: str, pod: str, pod_obj: Obj, node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL
) -> str | None:
    """Free the node lock as soon as HAMi's Bind has taken it and marked the pod allocating,
    before the Binding lands: on a mock-GPU node the lock guards nothing (the mock's Allocate
    does nothing), and every GPU pod whose Bind meets it would back off for a second or more.
    Still only the pod's own lock, resourceVersion-guarded. None when there is nothing to do."""
    node = annotations(pod_obj).get(ha.VGPU_NODE)
    if not node or (pod_obj.get("spec") or {}).get("nodeName"):
        return None
    node_obj = read_named_node(core, node)
    if node_obj is None:
        return LOCK_NODE_GONE
    if not is_mock_node(node_obj, node_label):
        return None
    return release_node_lock(core, node, namespace, pod, node_obj)


def release_pod(
    core: CoreV1Api,
    namespace: str,
    pod: str,
    pod_obj: Obj | None = None,
    node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL,
    freed_on: str | None = None,
) -> Outcome:
    """One idempotent pass over one pod: what the real device plugin does after Allocate.

    `pod_obj` (e.g. from a watch event) saves the first read; a conflict re-reads the pod.
    `freed_on`: the mock node whose lock the caller already freed for this very allocation
    (free_lock_at_allocation): bound there, the pod needs its bind phase only, and the node is
    not read again (at fleet scale that read is a quarter of the controller's requests).
    """
    released = False
    given = [pod_obj] if pod_obj is not None else []
    conflicts = 0

    def attempt() -> Outcome:
        nonlocal released, conflicts
        # The caller's read first; after a conflict, a fresh one of the pod and of its node.
        again, conflicts = conflicts > 0, conflicts + 1
        pod_obj = given.pop() if given else get_json_or_none(core.read_namespaced_pod, pod, namespace)
        if pod_obj is None:
            return Outcome(POD_GONE)
        phase = annotations(pod_obj).get(ha.BIND_PHASE)
        # Bound = HAMi's Bind patched bind-phase and then created the Binding (spec.nodeName).
        node = (pod_obj.get("spec") or {}).get("nodeName")
        if phase == ha.PHASE_FAILED:
            return Outcome(FAILED, node, "HAMi marked the allocation failed (bind-phase failed)")
        if phase not in (ha.PHASE_ALLOCATING, ha.PHASE_SUCCESS) or not node:
            return Outcome(NOT_BOUND, node)
        lock = LOCK_NOT_HELD
        if node != freed_on or again:
            node_obj = read_named_node(core, node)
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
                send(core.patch_namespaced_pod, pod, namespace, patch)
            except Exception as exc:
                if http_status(exc) == 404:
                    return Outcome(POD_GONE, node)
                if refused := refusal(exc, f"setting bind-phase success on {namespace}/{pod}"):
                    raise refused from exc
                raise
        if released:
            return Outcome(RELEASED, node)
        return Outcome(SUCCEEDED, node, "" if lock == LOCK_NOT_HELD else f"lock on {node} is {lock}")

    return retry_on_conflict(attempt)


def finished_pods(pods: list[Obj]) -> set[tuple[str, str]]:
    """The pods whose bind-phase is success: a lock still naming one was left by a cut release."""
    return {
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in pods
        if annotations(p).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
    }


class SweepIncomplete(Exception):
    """Some nodes' locks could not be freed (the others were): the caller tries again later."""


def release_locks_of_finished(
    core: CoreV1Api, done: set[tuple[str, str]], node_label: tuple[str, str] | None = MOCK_GPU_NODE_LABEL
) -> int:
    """Remove every mock node's lock that names a pod in `done`. One node cannot stop the
    others: a node refusing (4xx) is logged and left; a node failing otherwise (5xx, a timeout)
    is tried after the rest, then SweepIncomplete names it. Returns how many were removed."""
    released = 0
    failed: list[str] = []
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
            try:
                result = release_node_lock(core, name, lock.namespace, lock.pod, node)
            except (NotOurs, Refused) as exc:
                log.warning("node %s: the lock of %s/%s stays (%s)", name, lock.namespace, lock.pod, exc)
                continue
            except Exception as exc:
                log.warning("node %s: the lock of %s/%s stays for now (%s)", name, lock.namespace, lock.pod, exc)
                failed.append(name)
                continue
            if result == LOCK_RELEASED:
                log.info(
                    "node %s: released the lock of %s/%s (its bind-phase was already success)",
                    name,
                    lock.namespace,
                    lock.pod,
                )
                released += 1
    if failed:
        raise SweepIncomplete(f"{len(failed)} node(s) failed: {', '.join(sorted(failed)[:5])}")
    return released
