"""NodeGpuCapacity: seeds `nvidia.com/gpu` in a node's status, which HAMi's mock setup needs
(components.lifecycle.node_gpu_capacity says why only the status subresource serves). It lives in its own
module (pickled by reference): importing it creates no resources and does no I/O.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle.node_gpu_capacity import gpu_capacity, set_gpu_capacity
from components.providers.base import Provider, ProviderResource


class NodeGpuCapacityProvider(Provider):
    """Sets capacity and allocatable of nvidia.com/gpu on create/update, removes them on delete."""

    REPLACES = ("node",)
    # A new machine under the node's name (a replaced worker) starts without the capacity.
    UPDATES = ("count", "machine_id")

    def create(self, props: dict[str, Any]) -> CreateResult:
        set_gpu_capacity(core_api(props["kubeconfig"]), props["node"], int(props["count"]))
        return CreateResult(id_=props["node"], outs=dict(props))

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        set_gpu_capacity(core_api(news["kubeconfig"]), news["node"], int(news["count"]))
        return UpdateResult(outs=dict(news))

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        count = gpu_capacity(core_api(props["kubeconfig"]), id_)
        if count is None:
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs={**props, "count": count})

    def remove(self, id_: str, props: dict[str, Any]) -> None:
        set_gpu_capacity(core_api(props["kubeconfig"]), id_, None)


class NodeGpuCapacity(ProviderResource, module="gpu-tenancy", name="NodeGpuCapacity"):
    """`nvidia.com/gpu` = `count` in one node's status capacity and allocatable."""

    node: pulumi.Output[str]
    count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        kubeconfig: pulumi.Input[str],
        node: pulumi.Input[str],
        count: pulumi.Input[int],
        machine_id: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        inputs = {"kubeconfig": kubeconfig, "node": node, "count": count}
        if machine_id is not None:
            inputs["machine_id"] = machine_id
        super().__init__(NodeGpuCapacityProvider(), name, inputs, opts)
