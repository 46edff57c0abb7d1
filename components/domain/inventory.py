"""The fake cards of one node: their HAMi register entries and the resources the mock device
plugin would advertise for them. Docker workers (MockGpuInventory) and simulated nodes
(components.lifecycle.simulated_nodes) read them here, so a card looks the same on both."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from components.domain.catalog import GpuModel
from components.domain.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM, RES_GPUMEM_PERCENTAGE, DeviceInfo


class CardsOfANode(Protocol):
    """Anything that says which model and how many cards a node has (config's GpuFleet, rules' NodeGroup)."""

    @property
    def model(self) -> GpuModel: ...

    @property
    def cards_per_node(self) -> int: ...


def node_devices(tenant: str, node: str, fleet: CardsOfANode) -> list[DeviceInfo]:
    """One register entry per fake card; ids unique across tenants and nodes (node names are)."""
    base = re.sub(r"[^A-Za-z0-9-]", "-", f"GPU-{tenant}-{node}")
    return [
        DeviceInfo(
            id=f"{base}-{i}",
            index=i,
            count=fleet.model.split_count,
            devmem=fleet.model.memory_mb,
            devcore=fleet.model.cores,
            type=fleet.model.hami_type,
        )
        for i in range(fleet.cards_per_node)
    ]


def gpu_capacity(fleet: CardsOfANode) -> int:
    """`nvidia.com/gpu` to seed: the number of concurrent vGPUs the node's cards accept."""
    return fleet.cards_per_node * fleet.model.split_count


def advertised_resources(fleet: CardsOfANode) -> dict[str, str]:
    """A node's GPU resources as a docker worker shows them: the `nvidia.com/gpu` seed plus what
    the mock plugin (v1.0.1) advertises: memory and cores summed over the cards, 100 % per card."""
    cards = fleet.cards_per_node
    return {
        RES_GPU: str(gpu_capacity(fleet)),
        RES_GPUMEM: str(cards * fleet.model.memory_mb),
        RES_GPUCORES: str(cards * fleet.model.cores),
        RES_GPUMEM_PERCENTAGE: str(cards * 100),
    }


# What the mock device plugin advertises once it has registered with the node's kubelet: until
# then a GPU pod bound there is refused at admission (UnexpectedAdmissionError).
PLUGIN_RESOURCES = (RES_GPUMEM, RES_GPUCORES)


def offers(node: Mapping[str, Any], resources: Iterable[str] = PLUGIN_RESOURCES) -> bool:
    """Whether the node's kubelet offers each resource (allocatable > 0: its device plugin registered)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return all(str(allocatable.get(r, "0")) not in ("0", "") for r in resources)
