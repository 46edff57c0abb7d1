"""`nvidia.com/gpu` in a node's status (capacity and allocatable), which HAMi's mock setup needs:
the mock device plugin registers gpumem/gpucores only once the node's capacity already shows
`nvidia.com/gpu` > 0, and HAMi's scheduler keys node health on its allocatable. Neither can be
set through an ordinary node patch, only through the status subresource."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.domain.hami_annotations import RES_GPU
from components.kube.client import get_json_or_none, http_status

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api


def _status_patch(count: int | None) -> dict[str, Any]:
    value = None if count is None else str(count)
    return {"status": {"capacity": {RES_GPU: value}, "allocatable": {RES_GPU: value}}}


def set_gpu_capacity(core: CoreV1Api, node: str, count: int | None) -> None:
    """Set the node's `nvidia.com/gpu` to `count`, or remove it (None; a node already gone is fine)."""
    try:
        core.patch_node_status(node, _status_patch(count))
    except Exception as exc:
        if count is not None or http_status(exc) != 404:
            raise


def gpu_capacity(core: CoreV1Api, node: str) -> int | None:
    """The node's `nvidia.com/gpu` capacity (0 when unset), or None when the node is gone."""
    found = get_json_or_none(core.read_node_status, node)
    if found is None:
        return None
    capacity = ((found.get("status") or {}).get("capacity") or {}).get(RES_GPU)
    return int(capacity) if capacity is not None else 0
