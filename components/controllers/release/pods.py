"""Which pods the release controller cares about, read from what HAMi wrote on them: the
watch keeps only these, by key, so a pod never costs more than a dictionary entry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.controllers.release import lock as lr
from components.domain import hami_annotations as ha

# A pod by namespace and name.
Key = tuple[str, str]


def bind_delay(pod: Mapping[str, Any], now: float) -> float | None:
    value = lr.annotations(pod).get(ha.BIND_TIME)
    try:
        return max(0.0, now - int(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def key_of(pod: Mapping[str, Any]) -> Key:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def unschedulable(pod: Mapping[str, Any]) -> str | None:
    """The PodScheduled=False condition's message of a pod HAMi schedules, if any."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or spec.get("schedulerName") != ha.SCHEDULER_NAME:
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('lastTransitionTime')}|{cond.get('message')}"
    return None


def allocating(pod: Mapping[str, Any]) -> bool:
    return lr.annotations(pod).get(ha.BIND_PHASE) == ha.PHASE_ALLOCATING


def stage(pod: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Allocating or not, and the node it is bound to: the handling clock restarts when it changes."""
    return allocating(pod), (pod.get("spec") or {}).get("nodeName")


def worth_handling(pod: Mapping[str, Any]) -> bool:
    """Only these pods are kept and queued: HAMi left them allocating, or they wait unscheduled."""
    return allocating(pod) or unschedulable(pod) is not None
