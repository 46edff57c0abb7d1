"""DataStoreTeardown: on destroy, deletes Kamaji's DataStore after the tenants and before
Kamaji's chart, waiting for Kamaji to let it go (components.lifecycle.datastore_teardown says why). On
create and update it does nothing: the chart makes the DataStore. This module is imported by
the provider process: importing it does no I/O."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult

from components.kube.client import core_api
from components.lifecycle.datastore_teardown import delete_datastore
from components.providers.base import Provider, ProviderResource

TIMEOUT_SECONDS = 300.0


class DataStoreTeardownProvider(Provider):
    REPLACES = ("name",)
    UPDATES = ("timeout_seconds",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["name"], outs=props)

    def remove(self, id_: str, props: dict[str, Any]) -> None:
        delete_datastore(core_api(props["kubeconfig"]), id_, float(props["timeout_seconds"]))


class DataStoreTeardown(ProviderResource, module="gpu-tenancy", name="DataStoreTeardown"):
    """Kamaji's DataStore, deleted on destroy while Kamaji still runs."""

    def __init__(
        self,
        name: str,
        *,
        datastore: str,
        kubeconfig: pulumi.Input[str],
        timeout_seconds: float = TIMEOUT_SECONDS,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            DataStoreTeardownProvider(),
            name,
            {"name": datastore, "kubeconfig": kubeconfig, "timeout_seconds": timeout_seconds},
            opts,
        )
