"""What `up` waits for on one workload (the ReleaseWait back-end): every pod bound by HAMi with
its allocation finished, and, for a Deployment, its current rollout done. It only reads: the
release controller (fake cards) or the device plugin (real ones) does the finishing.

A Deployment is followed by generation and pod template: the wait starts once the Deployment
controller has seen the generation the stack applied, takes the pods of the ReplicaSet of that
revision (its `pod-template-hash`) as the workload's pods, and ends when `replicas` of them
are bound with bind-phase success and no other pod of the workload is left (the previous
template's, or any being deleted). At the deadline each pod says where it stands: unbound
ones with HAMi's reason, missing ones with the ReplicaSet's (a ResourceQuota refusal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.controllers.release.lock import FAILED, NOT_BOUND, POD_GONE, Outcome, annotations
from components.domain import hami_annotations as ha
from components.kube import hami_reasons
from components.kube.client import get_json, get_json_or_none
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import AppsV1Api, CoreV1Api

BOUND = "bound"  # bound, bind-phase success
ALLOCATING = "allocating"  # bound, bind-phase still allocating: nobody released it
NO_HAMI = "no-hami"  # bound without HAMi's annotations (the default scheduler placed it)
LEAVING = "leaving"  # a pod the rollout removes (previous template, or being deleted), still there

TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class PodResult:
    name: str
    outcome: Outcome


@dataclass(frozen=True)
class Rollout:
    """A Deployment at the generation the stack applied (metadata.generation after apply)."""

    deployment: str
    generation: int


def allocation_outcome(pod_obj: Obj) -> Outcome:
    """Where HAMi's allocation of one pod stands, read only: bound with bind-phase success
    (BOUND), marked failed (FAILED), bound but not released (ALLOCATING), bound without HAMi
    (NO_HAMI: the default scheduler placed it), or not bound yet (NOT_BOUND)."""
    phase = annotations(pod_obj).get(ha.BIND_PHASE)
    node = (pod_obj.get("spec") or {}).get("nodeName")
    if phase == ha.PHASE_FAILED:
        return Outcome(FAILED, node, "HAMi marked the allocation failed (bind-phase failed)")
    if not node:
        return Outcome(NOT_BOUND)
    if phase == ha.PHASE_SUCCESS:
        return Outcome(BOUND, node)
    if phase == ha.PHASE_ALLOCATING:
        return Outcome(
            ALLOCATING,
            node,
            f"bound to {node} but HAMi's allocation was never finished (bind-phase allocating): "
            "the tenant's release controller (fake cards) or the node's device plugin did not release it",
        )
    return Outcome(
        NO_HAMI,
        node,
        f"bound to {node} without HAMi (no {ha.BIND_PHASE}): the default scheduler placed it, so HAMi's "
        "webhook did not set schedulerName (is it reachable from the tenant API server?)",
    )


@dataclass
class _Template:
    """The Deployment's current pod template as its controller made it, or why not yet."""

    hash: str | None
    why_not: str = ""
    replica_set: Obj | None = None


def current_template(apps: AppsV1Api, namespace: str, rollout: Rollout, selector: str | None) -> _Template:
    d = get_json_or_none(apps.read_namespaced_deployment, rollout.deployment, namespace)
    if d is None:
        return _Template(None, f"deployment {namespace}/{rollout.deployment} does not exist")
    meta, status = d["metadata"], d.get("status") or {}
    generation = max(int(meta.get("generation") or 0), rollout.generation)
    if int(status.get("observedGeneration") or 0) < generation:
        return _Template(
            None,
            f"the Deployment controller has not seen generation {generation} of {rollout.deployment} "
            "(is kube-controller-manager running in the tenant?)",
        )
    revision = annotations(d).get(REVISION)
    listed = get_json(apps.list_namespaced_replica_set, namespace, label_selector=selector)
    for rs in listed.get("items", []):
        owners = {o.get("uid") for o in rs["metadata"].get("ownerReferences") or []}
        if meta.get("uid") in owners and annotations(rs).get(REVISION) == revision:
            return _Template((rs["metadata"].get("labels") or {}).get(TEMPLATE_HASH), replica_set=rs)
    return _Template(None, f"no ReplicaSet of revision {revision} of {rollout.deployment} yet")


def _replica_failure(rs: Obj | None) -> str:
    """Why the ReplicaSet could not create its pods (a ResourceQuota's refusal), if it says."""
    for cond in ((rs or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
            return f": {cond.get('message', '')}"
    return ""


def wait_for_pods(
    core: CoreV1Api,
    namespace: str,
    timeout: float,
    names: list[str] | None = None,
    selector: str | None = None,
    count: int = 0,
    interval: float = 0.5,
    rollout: Rollout | None = None,
    apps: AppsV1Api | None = None,
) -> list[PodResult]:
    """Until every pod of a workload is bound with HAMi's allocation finished (or failed), and
    a rollout's leaving pods are gone. Pods are given by name, or by label selector plus the
    number expected (a Deployment's pods appear over time); `rollout` follows a Deployment.
    At the deadline, pods still unbound carry HAMi's reason."""
    finished: dict[str, Outcome] = {}
    state: dict[str, Any] = {"current": [], "outcomes": {}, "leaving": {}, "template": None}

    def look() -> bool:
        leaving: dict[str, Obj] = {}
        if names is not None:
            pods = {n: get_json_or_none(core.read_namespaced_pod, n, namespace) for n in names}
        else:
            listed = get_json(core.list_namespaced_pod, namespace, label_selector=selector).get("items", [])
            pods = {p["metadata"]["name"]: p for p in listed if not p["metadata"].get("deletionTimestamp")}
            if rollout is not None:
                template = state["template"] = current_template(apps, namespace, rollout, selector)
                current = {n: p for n, p in pods.items() if _hash(p) == template.hash}
                leaving = {p["metadata"]["name"]: p for p in listed if p["metadata"]["name"] not in current}
                pods = current if template.hash else {}
        outcomes = {n: allocation_outcome(p) if p else Outcome(POD_GONE) for n, p in sorted(pods.items())}
        finished.update({n: o for n, o in outcomes.items() if o.status in (BOUND, FAILED)})
        state["current"], state["outcomes"], state["leaving"] = list(outcomes), outcomes, leaving
        started = rollout is None or bool(state["template"].hash)
        enough = names is not None or len(outcomes) >= count
        return started and enough and not leaving and all(n in finished for n in outcomes)

    try:
        wait_until(look, timeout=timeout, interval=interval, what="HAMi's allocation of the workload's pods")
        return [PodResult(n, finished[n]) for n in state["current"]]
    except TimedOut:
        pass
    return _at_deadline(core, namespace, count, names is None, finished, state)


def _hash(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(TEMPLATE_HASH)


def _at_deadline(
    core: CoreV1Api, namespace: str, count: int, counted: bool, finished: dict[str, Outcome], state: dict[str, Any]
) -> list[PodResult]:
    current, outcomes, template = state["current"], state["outcomes"], state["template"]
    results = []
    if template is not None and not template.hash:
        results.append(PodResult("", Outcome(NOT_BOUND, None, template.why_not)))
    for pod in current:
        outcome = finished.get(pod) or outcomes[pod]
        if outcome.status == NOT_BOUND:
            outcome = Outcome(NOT_BOUND, None, hami_reasons.pending_reason(core, namespace, pod).text)
        results.append(PodResult(pod, outcome))
    if counted and len(current) < count and (template is None or template.hash):
        new = "new " if template is not None else ""
        why = _replica_failure(template.replica_set) if template is not None else ""
        results.append(PodResult("", Outcome(NOT_BOUND, None, f"{len(current)} of {count} {new}pods exist{why}")))
    for name, pod in sorted(state["leaving"].items()):
        doing = "being deleted" if pod["metadata"].get("deletionTimestamp") else "of the previous pod template"
        node = (pod.get("spec") or {}).get("nodeName")
        results.append(PodResult(name, Outcome(LEAVING, node, f"{doing}, still there: the rollout has not finished")))
    return results
