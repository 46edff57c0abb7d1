"""Stand-in for a docker worker's container and `kubeadm join`, for engine tests that cannot run
Docker: a dynamic resource that, like a kindest/node container with the node's fixed name, is
replaced (deleting first) when its image changes; its create registers the Node the way a
kubelet does (no fake cards: those are the inventory's), as a KWOK node so KWOK runs and
removes its pods; its delete removes the Node (what NodeMembership's delete does for its own
worker). Its `machine_id` is new with every machine, as /etc/machine-id is."""

from __future__ import annotations

import uuid
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult

from components.config.model import POOL_DOCKER
from components.controllers.kwok import KWOK_NODE_ANNOTATION
from components.domain.names import pool_labels
from components.kube.client import core_api, get_json_or_none
from components.lifecycle.simulated_nodes import NODE_RESOURCES
from components.providers.base import Provider, ProviderResource


class StandInMachineProvider(Provider):
    REPLACES = ("node", "image")
    DELETE_BEFORE_REPLACE = True
    OUTPUTS = ("machine_id",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        core = core_api(props["kubeconfig"])
        node = props["node"]
        labels = {"kubernetes.io/hostname": node, **pool_labels(props["tenant"], props["pool"], POOL_DOCKER)}
        body = {
            "metadata": {"name": node, "labels": labels, "annotations": dict([KWOK_NODE_ANNOTATION])},
            "spec": {},
        }
        core.create_node(body)
        resources = dict(NODE_RESOURCES)
        core.patch_node_status(node, {"status": {"capacity": resources, "allocatable": resources}})
        return CreateResult(id_=node, outs={**props, "machine_id": uuid.uuid4().hex})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        core = core_api(props["kubeconfig"])
        if get_json_or_none(core.read_node, props["node"]) is not None:
            core.delete_node(props["node"])


class StandInMachine(ProviderResource, module="gpu-tenancy-tests", name="StandInMachine"):
    machine_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        node: str,
        image: str,
        tenant: str,
        pool: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        inputs = {"kubeconfig": kubeconfig, "node": node, "image": image, "tenant": tenant, "pool": pool}
        super().__init__(StandInMachineProvider(), name, inputs, opts)
