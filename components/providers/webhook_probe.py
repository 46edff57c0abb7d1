"""HamiWebhookProbe: fails the update unless HAMi's webhook answers the tenant API server
(components.lifecycle.webhook_probe says why that matters). Refresh probes briefly, not for the whole
update timeout: a tunnel that broke since the last update shows up without a long wait, as
drift (the schedulerName the probe saw), so the next update probes again with its full timeout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.domain.hami_annotations import SCHEDULER_NAME
from components.kube.client import core_api
from components.lifecycle.webhook_probe import PROBE_POD, WebhookUnreachableError, probe
from components.providers.base import Provider, ProviderResource, answering

REFRESH_TIMEOUT_SECONDS = 10.0


class HamiWebhookProbeProvider(Provider):
    UPDATES = ("namespace", "timeout_seconds", "hami_revision")
    OUTPUTS = ("scheduler_name",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        seen = probe(core_api(props["kubeconfig"]), props["namespace"], float(props["timeout_seconds"]))
        return CreateResult(id_=f"{props['namespace']}/{PROBE_POD}", outs={**props, "scheduler_name": seen})

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        seen = probe(core_api(news["kubeconfig"]), news["namespace"], float(news["timeout_seconds"]))
        return UpdateResult(outs={**news, "scheduler_name": seen})

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        timeout = min(REFRESH_TIMEOUT_SECONDS, float(props["timeout_seconds"]))
        core = answering(core_api(props["kubeconfig"]))
        try:
            seen = probe(core, props["namespace"], timeout, interval=2.0)
        except WebhookUnreachableError as exc:
            seen = exc.seen
        return ReadResult(id_=id_, outs={**props, "scheduler_name": seen})

    def drifted(self, olds: Mapping[str, Any]) -> bool:
        return olds.get("scheduler_name") != SCHEDULER_NAME


class HamiWebhookProbe(ProviderResource, module="gpu-tenancy", name="HamiWebhookProbe"):
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
                "kubeconfig": kubeconfig,
                "namespace": namespace,
                "timeout_seconds": timeout_seconds,
                "hami_revision": hami_revision,
            },
            opts,
        )
