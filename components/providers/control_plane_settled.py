"""ControlPlaneSettled: a gate between a TenantControlPlane Kamaji reports Ready and the first
client of the new tenant, which waits until Kamaji has stopped rolling it
(components.lifecycle.control_plane_settled says why). It waits on create and when the tenant's version
changes (an upgrade rolls the control plane again); a refresh does not wait, and it holds nothing
in the tenant. This module is imported by the provider process: importing it does no I/O."""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle.control_plane_settled import SETTLE_SECONDS, TIMEOUT_SECONDS, observe, wait_settled
from components.providers.base import Provider, ProviderResource


def _settle(props: dict[str, Any]) -> float:
    core = core_api(props["kubeconfig"])
    return round(
        wait_settled(
            lambda: observe(core),
            settle=float(props["settle_seconds"]),
            timeout=float(props["timeout_seconds"]),
            clock=time.monotonic,
            sleep=time.sleep,
            endpoint=f"tenant {props['tenant']}'s API server",
        ),
        1,
    )


class ControlPlaneSettledProvider(Provider):
    REPLACES = ("tenant",)
    UPDATES = ("control_plane", "version", "settle_seconds")
    OUTPUTS = ("waited_seconds",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["tenant"], outs={**props, "waited_seconds": _settle(props)})

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "waited_seconds": _settle(news)})


class ControlPlaneSettled(ProviderResource, module="gpu-tenancy", name="ControlPlaneSettled"):
    """Done once the tenant API server has served steadily after Kamaji's first pass."""

    waited_seconds: pulumi.Output[float]

    def __init__(
        self,
        name: str,
        *,
        tenant: str,
        control_plane: pulumi.Input[str],
        version: str,
        kubeconfig: pulumi.Input[str],
        settle_seconds: float = SETTLE_SECONDS,
        timeout_seconds: float = TIMEOUT_SECONDS,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            ControlPlaneSettledProvider(),
            name,
            {
                "tenant": tenant,
                "control_plane": control_plane,
                "version": version,
                "kubeconfig": kubeconfig,
                "settle_seconds": settle_seconds,
                "timeout_seconds": timeout_seconds,
            },
            opts,
        )
