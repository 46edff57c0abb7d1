"""NodeMembership: a worker's Node in its tenant, from the kubelet's registration to its removal.

Create waits until the worker's kubelet has registered the Node (same machine ID as the worker
container), then revokes the bootstrap token the join used. Delete removes the Node only while it
is still this worker's: a replaced worker registers under the same name, and its predecessor's
clean-up must not remove it. So destroy leaves no NotReady ghost, and replacement no hole.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult

from components.kube.client import core_api
from components.lifecycle.bootstrap_token import delete_token
from components.lifecycle.node_membership import delete_node_if_mine, wait_for_node
from components.providers.base import Provider, ProviderResource


class NodeMembershipProvider(Provider):
    # The Node has one name: a new membership waits for its own registration after the old one.
    REPLACES = ("node", "machine_id")
    UPDATES = ("token_id",)
    OUTPUTS = ("uid",)
    DELETE_BEFORE_REPLACE = True

    def create(self, props: dict[str, Any]) -> CreateResult:
        core = core_api(props["kubeconfig"])
        uid = wait_for_node(core, props["node"], props["machine_id"], float(props["timeout_seconds"]))
        if props.get("token_id"):
            delete_token(core, props["token_id"])
        return CreateResult(id_=f"{props['node']}/{props['machine_id']}", outs={**props, "uid": uid})

    def remove(self, _id: str, props: dict[str, Any]) -> None:
        delete_node_if_mine(core_api(props["kubeconfig"]), props["node"], props["machine_id"])


class NodeMembership(ProviderResource, module="gpu-tenancy", name="NodeMembership"):
    uid: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        node: str,
        machine_id: pulumi.Input[str],
        token_id: pulumi.Input[str] = "",
        timeout_seconds: int = 300,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            NodeMembershipProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "node": node,
                "machine_id": machine_id,
                "token_id": token_id,
                "timeout_seconds": timeout_seconds,
            },
            opts,
        )
