"""MockGpuInventory: the fake cards of each worker node, as HAMi and its mock plugin read them."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import GpuFleet
from components.domain.hami_annotations import GPU_NODE_LABEL, NODE_REGISTER, encode_node_register
from components.domain.inventory import gpu_capacity, node_devices
from components.domain.names import MACHINE_ID_ANNOTATION, MOCK_GPU_NODE_LABEL, gpu_model_label
from components.domain.rules import Fleet
from components.platform.component_options import waits_for
from components.providers.node_gpu_capacity import NodeGpuCapacity


def inventory_summary(fleet: Fleet) -> dict[str, object]:
    """The tenant's cards in all (a mixed fleet names each model), and per pool."""
    capacity = fleet.capacity
    return {
        "model": " + ".join(m.display_name for m in fleet.models),
        "cards": fleet.cards,
        "memoryMb": capacity.gpumem_mb,
        "coresPercent": capacity.gpucores,
        "pools": {
            g.name: {"model": g.model.display_name, "nodes": g.nodes, "cardsPerNode": g.cards_per_node}
            for g in fleet.groups
        },
    }


def fake_cards_metadata(tenant: str, node: str, cards: GpuFleet) -> tuple[dict[str, str], dict[str, str]]:
    """A node's labels and annotations that describe its fake cards to HAMi (the mock plugin reads
    the register annotation; HAMi's scheduler and the pool's selectors read the labels)."""
    labels = {**dict((GPU_NODE_LABEL, MOCK_GPU_NODE_LABEL)), **gpu_model_label(cards.model)}
    return labels, {NODE_REGISTER: encode_node_register(node_devices(tenant, node, cards))}


@dataclass
class MockGpuInventoryArgs:
    tenant: str
    fleet: GpuFleet
    # Nodes written at once, after the component's `depends_on` (whatever makes those Node objects
    # exist: the kubeadm joins; no data flows from them); GpuTenant adds its workers one by one (add).
    nodes: list[str]
    kubeconfig: pulumi.Input[str]


class MockGpuInventory(pulumi.ComponentResource):
    """Per node: labels gpu=on and the mock-GPU label + device-register annotation, then the
    capacity seed. Options: `provider` the tenant's; `depends_on` what every node's cards wait for.

    The annotation goes first: HAMi 2.8 reads a node's devices when its nvidia.com/gpu
    allocatable changes, so the capacity seed must find the annotation already there.
    """

    def __init__(self, name: str, args: MockGpuInventoryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:MockGpuInventory", name, None, opts)
        self._name, self._args, self._waits = name, args, waits_for(opts)
        self.patches: list[k8s.core.v1.NodePatch] = []
        self.capacities: list[NodeGpuCapacity] = []
        self.nodes: list[str] = []
        for node in args.nodes:
            self.add(node)
        if args.nodes:
            self.close()

    def close(self) -> None:
        """No node comes after this: the component's outputs are the nodes it holds."""
        self.register_outputs({"nodes": list(self.nodes)})

    def add(
        self,
        node: str,
        machine_id: pulumi.Input[str] | None = None,
        depends_on: list[pulumi.Resource] | None = None,
        fleet: GpuFleet | None = None,
    ) -> NodeGpuCapacity:
        """One node's cards (`fleet`: its pool's, default the inventory's), written after `depends_on`
        (its join); with `machine_id`, written again when another machine joins under the node's
        name (a replaced worker starts as a new Node). Returns the capacity seed, the last step:
        the node's cards are in place once it is."""
        args = self._args
        cards = fleet or args.fleet
        labels, register = fake_cards_metadata(args.tenant, node, cards)
        annotations: dict[str, pulumi.Input[str]] = dict(register)
        if machine_id is not None:
            annotations[MACHINE_ID_ANNOTATION] = machine_id
        patch = k8s.core.v1.NodePatch(
            f"{self._name}-{node}",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                name=node,
                labels=labels,
                annotations=annotations,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self._waits, *(depends_on or [])]),
        )
        capacity = NodeGpuCapacity(
            f"{self._name}-{node}-capacity",
            kubeconfig=args.kubeconfig,
            node=node,
            count=gpu_capacity(cards),
            machine_id=machine_id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[patch]),
        )
        self.nodes.append(node)
        self.patches.append(patch)
        self.capacities.append(capacity)
        return capacity
