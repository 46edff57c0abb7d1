"""Handing a worker's pods over while the worker is replaced (a tenant upgrade moves each docker
worker to the next minor's image), as `kubectl drain` and `kubectl uncordon` do it, then checking
that what left came back.

- `drain`: cordon the Node, evict every pod on it through the Eviction API (so a
  PodDisruptionBudget holds: a refused eviction is tried again until the deadline), except
  DaemonSet pods (they belong to the node and come back with it) and mirror pods (the kubelet's
  own); wait until none of them is left on the node. A pod no controller owns is evicted too
  (`kubectl drain --force`): it would die with the worker anyway, and nothing brings it back (the
  stack's own Pod workloads are re-created after HAMi follows the upgrade). Returns the pods that
  left, with their controllers.
- `settle`: uncordon the successor, wait until it is Ready, then until every controller that lost
  pods has its replicas bound again (a GPU pod: with HAMi's bind-phase success). At the deadline
  the error names the pods still out, with HAMi's reason for a pending one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from components.controllers.release.lock import NOT_BOUND
from components.kube import hami_reasons
from components.kube.client import apps_api_of, get_json, get_json_or_none, http_status, send
from components.kube.waiting import TimedOut, wait_until
from components.lifecycle.release_wait import BOUND, NO_HAMI, allocation_outcome

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

Obj = Mapping[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
GPU_RESOURCE_PREFIX = "nvidia.com/"
# Controllers whose pods come back elsewhere, and where their desired count lives.
REPLICATED = ("ReplicaSet", "StatefulSet", "ReplicationController")


class HandoverError(Exception):
    """A drain or settle that did not finish: says which pods, and why."""


@dataclass(frozen=True)
class Moved:
    """A pod evicted from a worker, and the controller that should bring it back (or none)."""

    namespace: str
    pod: str
    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, str]) -> Moved:
        return cls(**{f.name: d.get(f.name, "") for f in fields(cls)})


def _controller(pod: Obj) -> Obj | None:
    refs = pod["metadata"].get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def stays(pod: Obj) -> bool:
    """DaemonSet and mirror pods stay on their node (kubectl drain --ignore-daemonsets)."""
    owner = _controller(pod)
    mirror = MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {})
    return mirror or (owner is not None and owner.get("kind") == "DaemonSet")


def moved(pod: Obj) -> Moved:
    owner = _controller(pod) or {}
    meta = pod["metadata"]
    return Moved(meta["namespace"], meta["name"], owner.get("kind", ""), owner.get("name", ""), owner.get("uid", ""))


def asks_gpu(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return any(
        key.startswith(GPU_RESOURCE_PREFIX)
        for c in containers
        for part in ("limits", "requests")
        for key in ((c.get("resources") or {}).get(part) or {})
    )


def _pods_on(core: CoreV1Api, node: str) -> list[Obj]:
    return get_json(core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}").get("items", [])


def set_unschedulable(core: CoreV1Api, node: str, unschedulable: bool) -> bool:
    """Cordon or uncordon; False when the Node does not exist."""
    try:
        core.patch_node(node, {"spec": {"unschedulable": unschedulable or None}})
        return True
    except Exception as exc:
        if http_status(exc) == 404:
            return False
        raise


def _evict(core: CoreV1Api, pod: Obj) -> bool:
    """True once the eviction is accepted or the pod is gone; False while a budget refuses it."""
    meta = pod["metadata"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    try:
        send(core.create_namespaced_pod_eviction, meta["name"], meta["namespace"], body)
        return True
    except Exception as exc:
        if http_status(exc) == 404:
            return True
        if http_status(exc) == 429:  # a PodDisruptionBudget: not now
            return False
        raise


def drain(core: CoreV1Api, node: str, timeout: float, interval: float = 1.0) -> list[Moved]:
    """Cordon `node` and evict its pods (see the module); returns what left. A node that does not
    exist has nothing to hand over."""
    if not set_unschedulable(core, node, True):
        return []
    leaving = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in _pods_on(core, node) if not stays(p)}
    left = [moved(p) for p in leaving.values()]
    here: list[Obj] = []

    def gone() -> bool:
        here[:] = [p for p in _pods_on(core, node) if (p["metadata"]["namespace"], p["metadata"]["name"]) in leaving]
        for pod in here:
            if not pod["metadata"].get("deletionTimestamp"):
                _evict(core, pod)
        return not here

    try:
        wait_until(gone, timeout=timeout, interval=interval, what=f"the pods to leave node {node}")
    except TimedOut:
        still = sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in here)
        raise HandoverError(
            f"node {node}: {len(still)} pod(s) still there after {timeout:g} s of draining: {', '.join(still)} "
            "(a PodDisruptionBudget that allows no disruption, or a kubelet that does not stop them)"
        ) from None
    return left


def node_ready(node: Obj | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _desired(core: CoreV1Api, kind: str, namespace: str, name: str, uid: str) -> int | None:
    """The controller's replicas, or None when it is gone (or replaced: another uid)."""
    if kind == "ReplicationController":
        obj = get_json_or_none(core.read_namespaced_replication_controller, name, namespace)
    else:
        apps = apps_api_of(core)
        read = apps.read_namespaced_replica_set if kind == "ReplicaSet" else apps.read_namespaced_stateful_set
        obj = get_json_or_none(read, name, namespace)
    if obj is None or obj["metadata"].get("uid") != uid:
        return None
    return int((obj.get("spec") or {}).get("replicas", 1))


def back(pod: Obj) -> bool:
    """Placed again: bound, and a GPU pod with HAMi's allocation finished."""
    outcome = allocation_outcome(pod).status
    return outcome == BOUND or (outcome == NO_HAMI and not asks_gpu(pod))


@dataclass(frozen=True)
class Shortfall:
    owner: str
    desired: int
    placed: int
    pending: tuple[str, ...]


def shortfalls(core: CoreV1Api, left: list[Moved]) -> list[Shortfall]:
    """Per controller that lost pods: how many of its pods are placed again, if fewer than it wants."""
    owners = {(m.namespace, m.owner_kind, m.owner_name, m.owner_uid) for m in left if m.owner_kind in REPLICATED}
    listed: dict[str, list[Obj]] = {}  # one pod list per namespace, however many controllers lost pods there
    short = []
    for namespace, kind, name, uid in sorted(owners):
        desired = _desired(core, kind, namespace, name, uid)
        if desired is None:
            continue  # the controller went (a rollout replaced it): nothing to bring back
        if namespace not in listed:
            live = get_json(core.list_namespaced_pod, namespace).get("items", [])
            listed[namespace] = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        pods = [p for p in listed[namespace] if (_controller(p) or {}).get("uid") == uid]
        placed = [p for p in pods if back(p)]
        if len(placed) < desired:
            pending = tuple(sorted(p["metadata"]["name"] for p in pods if not back(p)))
            short.append(Shortfall(f"{namespace}/{kind}/{name}", desired, len(placed), pending))
    return short


def settle(core: CoreV1Api, node: str, left: list[Moved], timeout: float, interval: float = 1.0) -> None:
    """Uncordon `node`, wait until it is Ready and every controller that lost pods to the drain has
    them placed again (see the module)."""
    state: dict[str, Any] = {"ready": False, "short": []}

    def settled() -> bool:
        set_unschedulable(core, node, False)
        state["ready"] = node_ready(get_json_or_none(core.read_node, node))
        state["short"] = shortfalls(core, left) if state["ready"] else []
        return state["ready"] and not state["short"]

    try:
        wait_until(settled, timeout=timeout, interval=interval, what=f"node {node} and its pods")
    except TimedOut:
        if not state["ready"]:
            raise HandoverError(f"node {node}: not Ready within {timeout:g} s of its replacement") from None
        raise HandoverError(
            f"node {node} is Ready, but after {timeout:g} s the pods it handed over are not all placed again: "
            + "; ".join(_say(core, s) for s in state["short"])
        ) from None


def _say(core: CoreV1Api, s: Shortfall) -> str:
    namespace = s.owner.split("/", 1)[0]
    why = ""
    if s.pending:
        pod = get_json_or_none(core.read_namespaced_pod, s.pending[0], namespace)
        if pod is not None and allocation_outcome(pod).status == NOT_BOUND:
            why = f" ({s.pending[0]}: {hami_reasons.pending_reason(core, namespace, s.pending[0]).text})"
        else:
            why = f" ({s.pending[0]}: bound, allocation not finished)"
    return f"{s.owner}: {s.placed} of {s.desired} placed{why}"
