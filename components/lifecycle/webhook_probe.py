"""Proof that the tenant API server reaches HAMi's admission webhook.

The tenant API server runs in the management cluster; HAMi's webhook runs on the tenant's
workers, reached only through Kamaji's Konnectivity tunnel. The webhook's failurePolicy is
Ignore, so when the tunnel is down GPU pods are admitted unchanged and silently scheduled by the
default scheduler, without HAMi's accounting. The probe makes that visible: it
creates a GPU pod with server-side dry run (HAMi's webhook declares sideEffects None, so it is
called) and raises, with the reason, unless the answer comes back mutated by HAMi.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.domain.hami_annotations import RES_GPUMEM, SCHEDULER_NAME
from components.kube.client import get_json
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

PROBE_POD = "gpu-tenancy-webhook-probe"


class WebhookUnreachableError(Exception):
    """HAMi's webhook did not mutate a GPU pod: GPU pods would bypass HAMi. `seen`: the
    schedulerName the last dry-run pod came back with (or the API's error)."""

    def __init__(self, message: str, seen: str = ""):
        super().__init__(message)
        self.seen = seen


def probe_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": PROBE_POD, "labels": {"app.kubernetes.io/name": PROBE_POD}},
        "spec": {
            "containers": [
                {"name": "probe", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {RES_GPUMEM: "1"}}}
            ]
        },
    }


def probe_once(core: CoreV1Api, namespace: str) -> str:
    """The scheduler name a dry-run GPU pod comes back with ("" when the API rejects it)."""
    answer = get_json(core.create_namespaced_pod, namespace, probe_pod(), dry_run="All")
    return (answer.get("spec") or {}).get("schedulerName") or ""


def probe(core: CoreV1Api, namespace: str, timeout: float, interval: float = 3.0) -> str:
    """Wait up to `timeout` for HAMi's mutation; raise WebhookUnreachableError with the facts."""
    seen = {"scheduler": ""}

    def mutated() -> bool:
        try:
            seen["scheduler"] = probe_once(core, namespace)
        except Exception as exc:  # an API error is a finding too, reported below if it persists
            seen["scheduler"] = f"error: {getattr(exc, 'reason', '') or exc}"
        return seen["scheduler"] == SCHEDULER_NAME

    try:
        wait_until(mutated, timeout=timeout, interval=interval, what="HAMi's webhook")
    except TimedOut:
        raise WebhookUnreachableError(
            f"HAMi's admission webhook did not mutate a GPU pod within {timeout:g} s (dry-run pod in "
            f"{namespace} came back with schedulerName {seen['scheduler']!r}, expected {SCHEDULER_NAME!r}). "
            "The tenant API server cannot reach the webhook on the tenant's workers: check the "
            "Konnectivity agents (kube-system/konnectivity-agent) and the hami-scheduler pod. Until then "
            "GPU pods are scheduled by the default scheduler, without HAMi.",
            seen=seen["scheduler"],
        ) from None
    return SCHEDULER_NAME
