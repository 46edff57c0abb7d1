"""NodeDrain and NodeSettled: the two ends of a docker worker's replacement (components.lifecycle.
node_handover says what each does).

A worker's resources run in this order, and a tenant's workers one after another (GpuTenant):
NodeDrain -> container (replaced, delete first) -> join -> NodeMembership -> labels -> fake
cards -> NodeSettled -> the next worker's NodeDrain. So when a tenant's version (its workers'
image) changes, one worker at a time is drained, replaced, and settled (Ready, its pods placed
again) before the next is touched.

- NodeDrain is updated when the worker's image changes: it drains the Node before the old
  container goes, and outputs the pods that left. A new worker has nothing to hand over.
- NodeSettled is updated when the worker's machine changes (a new container joined) or a drain
  handed pods over: it uncordons, waits for Ready and for the pods to be placed again, or fails
  the update saying which are not and why. On a new worker it does nothing (HAMi's registration
  gate and the workloads' waits cover a first `up`).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle import node_handover as nh
from components.providers.base import Provider, ProviderResource

DRAIN_TIMEOUT_SECONDS = 300
# The successor's join (containerd, kubeadm's TLS bootstrap) is awaited by NodeMembership; this
# covers its CNI, HAMi's registration of its cards and the pods' placement.
SETTLE_TIMEOUT_SECONDS = 600


class NodeDrainProvider(Provider):
    REPLACES = ("node",)
    UPDATES = ("image",)
    OUTPUTS = ("moved",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["node"], outs={**props, "moved": []})

    def redo(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        left = nh.drain(core_api(news["kubeconfig"]), news["node"], float(news["timeout_seconds"]))
        return UpdateResult(outs={**news, "moved": [m.as_dict() for m in left]})


class NodeSettledProvider(Provider):
    REPLACES = ("node",)
    UPDATES = ("machine_id", "moved")

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["node"], outs=dict(props))

    def redo(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        left = [nh.Moved.from_dict(m) for m in news.get("moved") or []]
        nh.settle(core_api(news["kubeconfig"]), news["node"], left, float(news["timeout_seconds"]))
        return UpdateResult(outs=dict(news))


class NodeDrain(ProviderResource, module="gpu-tenancy", name="NodeDrain"):
    moved: pulumi.Output[list[dict[str, str]]]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        node: str,
        image: str,
        timeout_seconds: int = DRAIN_TIMEOUT_SECONDS,
        opts: pulumi.ResourceOptions | None = None,
    ):
        inputs = {"kubeconfig": kubeconfig, "node": node, "image": image, "timeout_seconds": timeout_seconds}
        super().__init__(NodeDrainProvider(), name, inputs, opts)


class NodeSettled(ProviderResource, module="gpu-tenancy", name="NodeSettled"):
    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        node: str,
        machine_id: pulumi.Input[str],
        moved: pulumi.Input[list[dict[str, str]]],
        timeout_seconds: int = SETTLE_TIMEOUT_SECONDS,
        opts: pulumi.ResourceOptions | None = None,
    ):
        inputs = {
            "kubeconfig": kubeconfig,
            "node": node,
            "machine_id": machine_id,
            "moved": moved,
            "timeout_seconds": timeout_seconds,
        }
        super().__init__(NodeSettledProvider(), name, inputs, opts)
