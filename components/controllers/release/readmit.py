"""Making a stack-declared bare GPU pod again after its node's kubelet refused it at admission.

When a worker restarts, its kubelet admits the pods bound to it before the device plugin has
registered again, and refuses every GPU pod among them: phase Failed, reason
UnexpectedAdmissionError ("no healthy devices"). A Deployment makes a new pod; a bare pod
(the stack's `kind: Pod` workload) stays Failed and no `up` sees it. The release controller
makes exactly the pods the stack names (`--readmit NAMESPACE/NAME`) again, by the same name and
spec, once the node that refused it offers the pod's devices again (or is gone): the new pod goes
through HAMi's webhook and scheduler like the first. What its identity may create and delete is
narrowed to those pods by admission policies (policy.readmit_policies).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from components.controllers.release.lock import read_named_node, refusal
from components.controllers.release.pods import Key, key_of
from components.domain.inventory import offers
from components.kube.client import get_json_or_none, http_status, send
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

log = logging.getLogger("gpu-tenancy.release-controller")

REFUSED_REASON = "UnexpectedAdmissionError"
# Annotations HAMi writes while placing a pod: the copy is placed afresh, so none of them go with it.
HAMI_PREFIX = "hami.io/"
# The volume the ServiceAccount admission adds (and adds again to the copy).
TOKEN_VOLUME_PREFIX = "kube-api-access-"
# Seconds the copy's create is retried after the original is gone (a 5xx, the name not yet free).
CREATE_SECONDS = 60.0

# Outcomes.
MADE_AGAIN = "made-again"
GONE = "gone"  # the refused pod went before we deleted it: not ours to make again


class NotYet(Exception):
    """The node that refused the pod does not offer its devices yet: tried again with the pod's backoff."""


def parse(values: Iterable[str]) -> frozenset[Key]:
    """`NAMESPACE/NAME` strings -> keys; ValueError naming the first malformed one."""
    keys = set()
    for value in values:
        namespace, sep, name = value.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise ValueError(f"{value!r} is not NAMESPACE/NAME")
        keys.add((namespace, name))
    return frozenset(keys)


def refused_at_admission(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == REFUSED_REASON


def extended_limits(pod: Mapping[str, Any]) -> set[str]:
    """The device-plugin resources (those with a domain, e.g. nvidia.com/gpumem) the pod asks for."""
    names = set()
    for container in (pod.get("spec") or {}).get("containers") or []:
        for res in ((container.get("resources") or {}).get("limits") or {}).keys():
            if "/" in res and not res.startswith("kubernetes.io/"):
                names.add(res)
    return names


def fresh_copy(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as it was declared: its name, labels, annotations (HAMi's placement dropped) and
    spec, without a node or the token volume admission added, so it is admitted and placed anew."""
    meta = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    volumes = [v for v in spec.get("volumes") or [] if not str(v.get("name", "")).startswith(TOKEN_VOLUME_PREFIX)]
    dropped = {v.get("name") for v in spec.get("volumes") or []} - {v.get("name") for v in volumes}
    if volumes:
        spec["volumes"] = volumes
    else:
        spec.pop("volumes", None)
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") not in dropped]
            if mounts:
                c["volumeMounts"] = mounts
            else:
                c.pop("volumeMounts", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(HAMI_PREFIX)}
    fresh: dict[str, Any] = {"name": meta["name"], "namespace": meta["namespace"]}
    if meta.get("labels"):
        fresh["labels"] = dict(meta["labels"])
    if annotations:
        fresh["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": fresh, "spec": spec}


def readmit(core: CoreV1Api, pod: Mapping[str, Any], create_seconds: float = CREATE_SECONDS) -> str:
    """Make the refused pod again: once its node offers the devices (NotYet before), check that
    its copy would be admitted (a dry-run create, answered AlreadyExists only when every admission
    step passed), delete the refused pod (by its uid), create the copy. Raises Refused when the
    copy would be refused: the refused pod is then left as it is."""
    namespace, name = key_of(pod)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name:
        node = read_named_node(core, node_name)
        wanted = extended_limits(pod)
        if node is not None and not offers(node, wanted):
            raise NotYet(f"node {node_name} does not offer {', '.join(sorted(wanted))} again yet")
    body = fresh_copy(pod)
    try:
        send(core.create_namespaced_pod, namespace, body, dry_run="All")
    except Exception as exc:
        if http_status(exc) != 409:
            raise (refusal(exc, "making it again (dry run)") or exc) from exc
    uid = (pod.get("metadata") or {}).get("uid")
    try:
        send(
            core.delete_namespaced_pod,
            name,
            namespace,
            body={"preconditions": {"uid": uid}, "gracePeriodSeconds": 0},
        )
    except Exception as exc:
        if http_status(exc) in (404, 409):  # gone, or another pod by that name now: not ours
            return GONE
        raise (refusal(exc, "deleting the refused pod") or exc) from exc

    def made() -> str | None:
        try:
            send(core.create_namespaced_pod, namespace, body)
            return MADE_AGAIN
        except Exception as exc:
            status = http_status(exc)
            if status == 409:  # the name is not free yet, or another pod took it meanwhile
                current = get_json_or_none(core.read_namespaced_pod, name, namespace) or {}
                meta = current.get("metadata") or {}
                return GONE if meta and meta.get("uid") != uid and not meta.get("deletionTimestamp") else None
            if (refused := refusal(exc, "making it again")) is not None:
                log.error("%s/%s: deleted, and its copy refused: %s", namespace, name, exc)
                raise refused from exc
            return None  # a server error, throttling: again

    try:
        outcome = wait_until(made, timeout=create_seconds, interval=1.0, what=f"{namespace}/{name} made again")
    except TimedOut:
        log.error("%s/%s: deleted, not made again within %.0f s", namespace, name, create_seconds)
        raise
    if outcome == GONE:
        return GONE
    log.info("%s/%s: refused at admission on %s; made again", namespace, name, node_name or "?")
    return MADE_AGAIN
