"""Why a GPU pod waits, in HAMi's own words, per node.

kube-scheduler's condition on a Pending pod is often generic (HAMi 2.8.3: `0/1 nodes are
available: 1 NodeUnfitPod`); HAMi says what it found in its own events: `FilteringFailed`
(`<n> nodes <Reason>(<node>,...)`, one event per reason) and `BindingFailed` (the node-lock
contention message). HAMi 2.10 also puts `<k>/<cards> <Reason>` into the scheduler's message.
This module reads all three and names each reason with its HAMi code and plain words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from components.kube.client import get_json, get_json_or_none, http_status

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

FILTERING_FAILED = "FilteringFailed"
BINDING_FAILED = "BindingFailed"
FAILED_SCHEDULING = "FailedScheduling"
FAILED_CREATE = "FailedCreate"
# Our code for HAMi's `node <n> has been locked within <t>` (v2.10 adds ": node lock contention").
NODE_LOCK_CONTENTION = "NodeLockContention"
NODE_UNREGISTERED = "NodeUnregistered"
QUOTA_EXCEEDED = "QuotaExceeded"

# HAMi's reason codes (pkg/device/common) and what they mean for a user.
WORDS: Mapping[str, str] = {
    "CardInsufficientCore": "not enough GPU cores (gpucores %) left on any card",
    "CardInsufficientMemory": "not enough GPU memory (gpumem MB) left on any card",
    "CardTypeMismatch": "no card of the node is of a type the pod allows (nvidia.com/use-gputype, nouse-gputype)",
    "CardUuidMismatch": "no card with the requested uuid",
    "CardTimeSlicingExhausted": "every vGPU slot of the card is taken",
    "CardComputeUnitsExhausted": "the card's cores are all taken",
    "CardNotHealth": "the card is not healthy",
    "CardCordoned": "the card is cordoned",
    "NumaNotFit": "cards on one NUMA node do not fit",
    "ExclusiveDeviceAllocateConflict": "a whole-card (100 % cores) request on a card already in use",
    "NodeInsufficientDevice": "more GPUs per container than the node has cards",
    "AllocatedCardsInsufficientRequest": "not enough fitting cards on the node",
    "ResourceQuotaNotFit": "the namespace's GPU quota is exceeded",
    NODE_LOCK_CONTENTION: "node lock contention: another GPU pod's allocation holds the node",
    NODE_UNREGISTERED: "HAMi has not registered the node's cards",
    QUOTA_EXCEEDED: "the namespace's GPU quota is exceeded",
}
_CODES = "|".join(sorted(WORDS, key=len, reverse=True))
_FILTER = re.compile(r"^(\d+) nodes (\w+)\(([^)]*)\)$")
_LOCKED = re.compile(r"node (\S+) (?:has been locked within \S+|is locked)")
_IN_MESSAGE = re.compile(rf"\b({_CODES})\b")
_UNREGISTERED = re.compile(r"node unregistered|node usage unavailable")
_QUOTA = re.compile(r"exceed\w* (?:the )?resource quota|exceeded quota|ResourceQuotaNotFit", re.IGNORECASE)


@dataclass(frozen=True)
class PendingReason:
    """HAMi's reasons per node ('' = node not named), and the whole text for a user."""

    by_node: dict[str, list[str]] = field(default_factory=dict)
    scheduler: str = ""

    @property
    def codes(self) -> list[str]:
        return sorted({c for codes in self.by_node.values() for c in codes})

    @property
    def text(self) -> str:
        parts = []
        for node in sorted(self.by_node):
            codes = self.by_node[node]
            where = f" on {node}" if node else ""
            parts.append(f"{', '.join(codes)}{where} ({'; '.join(WORDS.get(c, c) for c in codes)})")
        hami = f"HAMi: {'; '.join(parts)}" if parts else ""
        sched = f"scheduler: {self.scheduler}" if self.scheduler else ""
        return " - ".join(p for p in (hami, sched) if p) or "no scheduling event yet"


def _add(by_node: dict[str, list[str]], node: str, code: str) -> None:
    codes = by_node.setdefault(node, [])
    if code not in codes:
        codes.append(code)


ROUND_SECONDS = 5


def _stamp(event: Mapping[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp"))


def _when(event: Mapping[str, Any]) -> datetime:
    try:
        return datetime.fromisoformat(_stamp(event).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def parse(events: list[Mapping[str, Any]], condition: str = "") -> PendingReason:
    """HAMi's reasons from a pod's events (newest Filter/Bind round) and scheduler condition."""
    by_node: dict[str, list[str]] = {}
    hami = [e for e in events if e.get("reason") in (FILTERING_FAILED, BINDING_FAILED)]
    hami.sort(key=_stamp)
    if hami:
        newest = _when(hami[-1])
        # One Filter round writes one event per reason (then "no available node"), within a
        # moment; retries update the same events' lastTimestamp.
        for e in (e for e in hami if (newest - _when(e)).total_seconds() <= ROUND_SECONDS):
            message = str(e.get("message") or "")
            if m := _FILTER.match(message):
                for node in m.group(3).split(","):
                    _add(by_node, node, m.group(2))
            elif m := _LOCKED.search(message):
                _add(by_node, m.group(1), NODE_LOCK_CONTENTION)
            elif _QUOTA.search(message):
                _add(by_node, "", QUOTA_EXCEEDED)
    sched = [e for e in events if e.get("reason") in (FAILED_SCHEDULING, FAILED_CREATE)]
    sched.sort(key=_stamp)
    scheduler = condition or (str(sched[-1].get("message") or "") if sched else "")
    if not by_node:
        # HAMi 2.10 writes `<k>/<cards> <Reason>` into kube-scheduler's message itself.
        for code in _IN_MESSAGE.findall(scheduler):
            _add(by_node, "", code)
        if m := _LOCKED.search(scheduler):
            _add(by_node, m.group(1), NODE_LOCK_CONTENTION)
        if _UNREGISTERED.search(scheduler):
            _add(by_node, "", NODE_UNREGISTERED)
        if _QUOTA.search(scheduler):
            _add(by_node, "", QUOTA_EXCEEDED)
    return PendingReason(by_node=by_node, scheduler=scheduler)


def pending_reason(core: CoreV1Api, namespace: str, pod: str) -> PendingReason:
    """Read the pod's PodScheduled condition and events, and parse them."""
    obj = get_json_or_none(core.read_namespaced_pod, pod, namespace)
    if obj is None:
        return PendingReason(scheduler="pod no longer exists")
    condition = ""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
            condition = cond["message"]
    uid = obj["metadata"].get("uid")
    selector = f"involvedObject.name={pod},involvedObject.namespace={namespace}"
    try:
        listed = get_json(core.list_namespaced_event, namespace, field_selector=selector)
        events = [e for e in listed.get("items", []) if (e.get("involvedObject") or {}).get("uid") in (None, uid)]
    except Exception as exc:  # events are best effort: a missing reason must not hide the timeout
        if http_status(exc) is None:
            raise
        events = []
    return parse(events, condition)
