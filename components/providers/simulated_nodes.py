"""SimulatedNodes: one kwok pool's Node objects, with their fake cards, as one resource.

One resource per pool, not per node: the nodes are written in bulk (components.lifecycle.simulated_nodes),
so a pool of a thousand nodes costs one engine step. Update adds and removes only the difference;
refresh reads back which nodes still exist, so a deleted node is made again by the next `up`.
The mock-GPU label is an input too (`mock_label`): when it moves (it left `gpu-tenancy/mock-gpu`,
which a kubelet may set on itself), the next `up` writes the new one on every node of the pool and
removes the old one, so the release controller, which selects by the label, keeps finding them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from components.domain.catalog import GPU_MODELS
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.domain.rules import NodeGroup
from components.kube.client import core_api, http_status, send
from components.lifecycle.simulated_nodes import PARALLEL_REQUESTS, delete_nodes, ensure_nodes, pool_nodes
from components.providers.base import Provider, ProviderResource

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api


def _fleet(props: dict[str, Any]) -> NodeGroup:
    return NodeGroup(GPU_MODELS[props["model"]], len(props["names"]), int(props["cards_per_node"]), props["pool"])


# The label pools made before `mock_label` was an input carry.
LEGACY_MOCK_LABEL_KEY = "gpu-tenancy/mock-gpu"


def _core(props: dict[str, Any]) -> Any:
    return core_api(props["kubeconfig"], connections=PARALLEL_REQUESTS)


def mock_label() -> str:
    return "=".join(MOCK_GPU_NODE_LABEL)


def _unlabel(core: CoreV1Api, names: list[str], key: str) -> None:
    """Remove label `key` from these nodes (a node already gone is fine)."""

    def one(name: str) -> None:
        try:
            send(core.patch_node, name, {"metadata": {"labels": {key: None}}})
        except Exception as exc:
            if http_status(exc) != 404:
                raise

    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for future in [pool.submit(one, n) for n in names]:
            future.result()


class SimulatedNodesProvider(Provider):
    REPLACES = ("tenant", "pool")
    UPDATES = ("names", "model", "cards_per_node", "mock_label")
    DELETE_BEFORE_REPLACE = True

    def create(self, props: dict[str, Any]) -> CreateResult:
        ensure_nodes(_core(props), list(props["names"]), props["tenant"], props["pool"], _fleet(props))
        return CreateResult(id_=f"{props['tenant']}/{props['pool']}", outs=dict(props))

    def redo(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        core = _core(news)
        names = list(news["names"])
        same_cards = (olds.get("model"), olds.get("cards_per_node")) == (news["model"], news["cards_per_node"])
        relabel = olds.get("mock_label") != news.get("mock_label")
        have = set(olds.get("names") or []) if same_cards and not relabel else set()
        ensure_nodes(core, [n for n in names if n not in have], news["tenant"], news["pool"], _fleet(news))
        old_key = (olds.get("mock_label") or LEGACY_MOCK_LABEL_KEY).split("=", 1)[0]
        if relabel and old_key != MOCK_GPU_NODE_LABEL[0]:
            _unlabel(core, names, old_key)
        delete_nodes(core, news["tenant"], news["pool"], keep=names)
        return UpdateResult(outs=dict(news))

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        present = pool_nodes(_core(props), props["tenant"], props["pool"])
        return ReadResult(id_=id_, outs={**props, "names": [n for n in props["names"] if n in present]})

    def remove(self, _id: str, props: dict[str, Any]) -> None:
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
                "mock_label": mock_label(),
            },
            opts,
        )
