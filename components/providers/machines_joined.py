"""MachinesJoined: HAMi of a tenant of the team's own machines waits for one of them
(components.lifecycle.machines_joined says why). Refresh looks again: machines that all left show
up as drift, so the next update asks again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle.machines_joined import machines, ready_names, wait_for_machine
from components.providers.base import Provider, ProviderResource, answering


class MachinesJoinedProvider(Provider):
    UPDATES = ("pools", "timeout_seconds")
    OUTPUTS = ("ready",)

    def _wait(self, props: Mapping[str, Any]) -> list[str]:
        pools = {pool: int(count) for pool, count in props["pools"].items()}  # the engine's numbers are floats
        return wait_for_machine(core_api(props["kubeconfig"]), props["tenant"], pools, float(props["timeout_seconds"]))

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['tenant']}/machines", outs={**props, "ready": self._wait(props)})

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "ready": self._wait(news)})

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        core = answering(core_api(props["kubeconfig"]))
        return ReadResult(id_=id_, outs={**props, "ready": ready_names(machines(core, props["tenant"]))})

    def drifted(self, olds: Mapping[str, Any]) -> bool:
        return not olds.get("ready")


class MachinesJoined(ProviderResource, module="gpu-tenancy", name="MachinesJoined"):
    """Fails the update, saying what to do, until a machine of the tenant's external pools is Ready."""

    ready: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        tenant: str,
        pools: Mapping[str, int],
        timeout_seconds: int = 300,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            MachinesJoinedProvider(),
            name,
            {"kubeconfig": kubeconfig, "tenant": tenant, "pools": dict(pools), "timeout_seconds": timeout_seconds},
            opts,
        )
