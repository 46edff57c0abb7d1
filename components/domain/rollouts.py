"""How many pods a workload holds at once while it rolls out, by Kubernetes' own rules.

A rollout that starts a new pod before an old one is gone needs room for both: in the quota
(a ResourceQuota refuses the surge pod) and on the cards (HAMi refuses it). The config's fit
check, the budget shares and the pack all count a workload at its peak: replicas + surge.

- Deployment: `Recreate` surges nothing; `RollingUpdate` surges `maxSurge` (default 25 %),
  a percentage of the replicas rounded up, as the Deployment controller resolves it.
- DaemonSet: `RollingUpdate` surges `maxSurge` (default 0) of the nodes it runs on; `OnDelete` 0.
- StatefulSet, ReplicaSet, ReplicationController, Job, Pod: a pod is replaced only once it is gone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

RECREATE = "Recreate"
ROLLING_UPDATE = "RollingUpdate"
# The kinds whose rollout may surge, and their controller's default maxSurge.
DEFAULT_SURGE: dict[str, int | str] = {"Deployment": "25%", "DaemonSet": 0}


class RolloutError(ValueError):
    """A strategy the API server would refuse, or that the rules cannot count."""


def scaled(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString of the API (3 or "25%") against `total`, as intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, bool):
        raise RolloutError(f"{value!r} is not a number or a percentage")
    if isinstance(value, float) and value.is_integer():  # a number as the policy engine passes it
        value = int(value)
    if isinstance(value, int):
        if value < 0:
            raise RolloutError(f"{value} is negative")
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise RolloutError(f"{value!r} is not a number or a percentage like '25%'")


def surge(kind: str, strategy: Mapping[str, Any] | None, replicas: int) -> int:
    """Extra pods the workload may hold during a rollout, above its `replicas` (for a DaemonSet,
    `replicas` is the number of nodes it runs on). `strategy` is the object's `spec.strategy`
    (Deployment) or `spec.updateStrategy` (DaemonSet), None when unset."""
    strategy = strategy or {}
    if kind not in DEFAULT_SURGE or strategy.get("type", ROLLING_UPDATE) != ROLLING_UPDATE:
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxSurge", DEFAULT_SURGE[kind])
    return scaled(value, replicas, round_up=True)
