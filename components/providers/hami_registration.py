"""HamiRegistration: `pulumi up` waits until HAMi's scheduler has registered every fake card.

Workloads depend on it, so none is created while HAMi would still refuse it (see
components.lifecycle.hami_registration). A node left out fails the update, naming the node and the
likely cause. Refresh looks once and does not wait; a card it no longer finds is drift, so the
next update waits for it again (and fails naming it if it stays away).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle.hami_registration import check, wait_registered
from components.providers.base import Provider, ProviderResource, answering


def _wait(props: dict[str, Any]) -> dict[str, Any]:
    counts = wait_registered(core_api(props["kubeconfig"]), props["expected"], float(props["timeout_seconds"]))
    return {**props, "registered": counts}


class HamiRegistrationProvider(Provider):
    UPDATES = ("expected", "hami_revision", "timeout_seconds")
    OUTPUTS = ("registered",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="hami-registration", outs=_wait(props))

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=_wait(news))

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        absent, _why = check(answering(core_api(props["kubeconfig"])), props["expected"])
        counts = {n: len(d) - len(absent.get(n, [])) for n, d in props["expected"].items()}
        return ReadResult(id_=id_, outs={**props, "registered": counts})

    def drifted(self, olds: Mapping[str, Any]) -> bool:
        registered = olds.get("registered") or {}
        return any(registered.get(n, 0) < len(d) for n, d in (olds.get("expected") or {}).items())


class HamiRegistration(ProviderResource, module="gpu-tenancy", name="HamiRegistration"):
    """Waits for HAMi to list `expected` (card ids per node) in its metrics."""

    registered: pulumi.Output[dict[str, int]]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        expected: dict[str, list[str]],
        hami_revision: pulumi.Input[Any],
        timeout_seconds: int = 120,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            HamiRegistrationProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "expected": expected,
                "hami_revision": hami_revision,
                "timeout_seconds": timeout_seconds,
            },
            opts,
        )
