"""NodeGpuCapacity: seeds `nvidia.com/gpu` in a node's status, which HAMi's mock setup needs.

The mock device plugin registers gpumem/gpucores only once the node's capacity already shows
`nvidia.com/gpu` > 0, and HAMi's scheduler keys node health on its allocatable; neither can be
set through an ordinary node patch, only through the status subresource, so this is a Python
dynamic provider using the official kubernetes client. It lives in its own module (pickled by
reference): importing it creates no resources and does no I/O.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.gpu.hami_annotations import RES_GPU
from components.ops.kube import core_api, http_status


def _status_patch(count: int | None) -> dict[str, Any]:
    value = None if count is None else str(count)
    return {"status": {"capacity": {RES_GPU: value}, "allocatable": {RES_GPU: value}}}


class NodeGpuCapacityProvider(ResourceProvider):
    """Sets capacity and allocatable of nvidia.com/gpu on create/update, removes them on delete."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        core_api(props["kubeconfig"]).patch_node_status(props["node"], _status_patch(int(props["count"])))
        return CreateResult(id_=props["node"], outs=dict(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in ("node", "count", "kubeconfig") if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed),
            replaces=["node"] if "node" in changed else [],
            delete_before_replace=False,
        )

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        core_api(news["kubeconfig"]).patch_node_status(news["node"], _status_patch(int(news["count"])))
        return UpdateResult(outs=dict(news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            node = core_api(props["kubeconfig"]).read_node_status(id_)
        except Exception as exc:
            if http_status(exc) == 404:
                return ReadResult(id_=None, outs={})
            raise
        capacity = (node.status.capacity or {}).get(RES_GPU)
        return ReadResult(id_=id_, outs={**props, "count": int(capacity) if capacity is not None else 0})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            core_api(props["kubeconfig"]).patch_node_status(id_, _status_patch(None))
        except Exception as exc:
            if not http_status(exc) == 404:
                raise


class NodeGpuCapacity(Resource, module="gpu-tenancy", name="NodeGpuCapacity"):
    """`nvidia.com/gpu` = `count` in one node's status capacity and allocatable."""

    node: pulumi.Output[str]
    count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        kubeconfig: pulumi.Input[str],
        node: pulumi.Input[str],
        count: pulumi.Input[int],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            NodeGpuCapacityProvider(),
            name,
            {"kubeconfig": pulumi.Output.secret(kubeconfig), "node": node, "count": count},
            opts,
        )
