"""SimulatedNodes: one kwok pool's Node objects, with their fake cards, as one resource.

One resource per pool, not per node: the nodes are written in bulk (components.ops.simulated_nodes),
so a pool of a thousand nodes costs one engine step. Update adds and removes only the difference;
refresh reads back which nodes still exist, so a deleted node is made again by the next `up`.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.gpu.catalog import GPU_MODELS
from components.gpu.rules import NodeGroup
from components.ops.kube import core_api
from components.ops.simulated_nodes import PARALLEL_REQUESTS, delete_nodes, ensure_nodes, pool_nodes
from components.providers.base import Provider, ProviderResource


def _fleet(props: dict[str, Any]) -> NodeGroup:
    return NodeGroup(GPU_MODELS[props["model"]], len(props["names"]), int(props["cards_per_node"]), props["pool"])


def _core(props: dict[str, Any]) -> Any:
    return core_api(props["kubeconfig"], connections=PARALLEL_REQUESTS)


class SimulatedNodesProvider(Provider):
    REPLACES = ("tenant", "pool")
    UPDATES = ("names", "model", "cards_per_node", "kubeconfig")
    DELETE_BEFORE_REPLACE = True

    def create(self, props: dict[str, Any]) -> CreateResult:
        ensure_nodes(_core(props), list(props["names"]), props["tenant"], props["pool"], _fleet(props))
        return CreateResult(id_=f"{props['tenant']}/{props['pool']}", outs=dict(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        core = _core(news)
        names = list(news["names"])
        same_cards = (olds.get("model"), olds.get("cards_per_node")) == (news["model"], news["cards_per_node"])
        have = set(olds.get("names") or []) if same_cards else set()
        ensure_nodes(core, [n for n in names if n not in have], news["tenant"], news["pool"], _fleet(news))
        delete_nodes(core, news["tenant"], news["pool"], keep=names)
        return UpdateResult(outs=dict(news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        present = pool_nodes(_core(props), props["tenant"], props["pool"])
        return ReadResult(id_=id_, outs={**props, "names": [n for n in props["names"] if n in present]})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        delete_nodes(_core(props), props["tenant"], props["pool"])


class SimulatedNodes(ProviderResource, module="gpu-tenancy", name="SimulatedNodes"):
    """The nodes `names` of a kwok pool, each with `cards_per_node` fake `model` cards."""

    names: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        tenant: str,
        pool: str,
        names: list[str],
        model: str,
        cards_per_node: int,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            SimulatedNodesProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "tenant": tenant,
                "pool": pool,
                "names": names,
                "model": model,
                "cards_per_node": cards_per_node,
            },
            opts,
        )
