"""HamiWebhookProbe: proves that the tenant API server reaches HAMi's admission webhook.

The tenant API server runs in the management cluster; HAMi's webhook runs on the tenant's
workers, reached only through Kamaji's Konnectivity tunnel. The webhook's failurePolicy is
Ignore, so when the tunnel is down GPU pods are admitted unchanged and silently scheduled by the
default scheduler, without HAMi's accounting. This dynamic provider makes that visible: it
creates a GPU pod with server-side dry run (HAMi's webhook declares sideEffects None, so it is
called) and fails the update, with the reason, unless the answer comes back mutated by HAMi.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.gpu.hami_annotations import RES_GPUMEM
from components.ops.kube import core_api

HAMI_SCHEDULER_NAME = "hami-scheduler"
PROBE_POD = "gpu-tenancy-webhook-probe"


class WebhookUnreachableError(Exception):
    """HAMi's webhook did not mutate a GPU pod: GPU pods would bypass HAMi."""


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


def probe_once(core: Any, namespace: str) -> str:
    """The scheduler name a dry-run GPU pod comes back with ("" when the API rejects it)."""
    answer = core.create_namespaced_pod(namespace, probe_pod(), dry_run="All")
    return answer.spec.scheduler_name or ""


def probe(core: Any, namespace: str, timeout: float, interval: float = 3.0) -> str:
    """Wait up to `timeout` for HAMi's mutation; raise WebhookUnreachableError with the facts."""
    deadline = time.monotonic() + timeout
    seen = ""
    while True:
        try:
            seen = probe_once(core, namespace)
            if seen == HAMI_SCHEDULER_NAME:
                return seen
        except Exception as exc:  # an API error is a finding too, reported below if it persists
            seen = f"error: {getattr(exc, 'reason', '') or exc}"
        if time.monotonic() >= deadline:
            raise WebhookUnreachableError(
                f"HAMi's admission webhook did not mutate a GPU pod within {timeout:g} s (dry-run pod in "
                f"{namespace} came back with schedulerName {seen!r}, expected {HAMI_SCHEDULER_NAME!r}). "
                "The tenant API server cannot reach the webhook on the tenant's workers: check the "
                "Konnectivity agents (kube-system/konnectivity-agent) and the hami-scheduler pod. Until then "
                "GPU pods are scheduled by the default scheduler, without HAMi."
            )
        time.sleep(interval)


class HamiWebhookProbeProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        seen = probe(core_api(props["kubeconfig"]), props["namespace"], float(props["timeout_seconds"]))
        return CreateResult(id_=f"{props['namespace']}/{PROBE_POD}", outs={**props, "scheduler_name": seen})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("kubeconfig", "namespace", "timeout_seconds", "hami_revision")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        seen = probe(core_api(news["kubeconfig"]), news["namespace"], float(news["timeout_seconds"]))
        return UpdateResult(outs={**news, "scheduler_name": seen})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # A refresh re-checks the path: a tunnel that broke since the last update shows up here.
        seen = probe(core_api(props["kubeconfig"]), props["namespace"], float(props["timeout_seconds"]))
        return ReadResult(id_=id_, outs={**props, "scheduler_name": seen})


class HamiWebhookProbe(Resource, module="gpu-tenancy", name="HamiWebhookProbe"):
    """Fails the update unless HAMi's webhook answers the tenant API server."""

    scheduler_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        hami_revision: pulumi.Input[Any],
        namespace: str = "default",
        timeout_seconds: int = 180,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            HamiWebhookProbeProvider(),
            name,
            {
                "kubeconfig": pulumi.Output.secret(kubeconfig),
                "namespace": namespace,
                "timeout_seconds": timeout_seconds,
                "hami_revision": hami_revision,
                "scheduler_name": None,
            },
            opts,
        )
