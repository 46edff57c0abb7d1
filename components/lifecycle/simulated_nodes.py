"""Simulated nodes (a kwok pool): Node objects only, made Ready and their pods Running by KWOK.

Each node carries the tenant's fake cards exactly as a docker worker does (the same register
annotation and the resources the mock plugin would advertise), the mock-GPU label the release
controller acts on, and its pool's labels. It carries no taint, so GPU pods land on it without
a toleration, and no `kubernetes.io/os` label: workloads that select `kubernetes.io/os: linux`
(CoreDNS, kube-proxy, most charts) stay on real workers; HAMi's scheduler is pinned there too.

A pool is written in bulk from a thread pool: one resource per pool rather than one per node
keeps `pulumi up` linear and short for a thousand nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from components.config.model import POOL_KWOK
from components.controllers.kwok import KWOK_NODE_ANNOTATION
from components.domain.hami_annotations import GPU_NODE_LABEL, NODE_REGISTER, encode_node_register
from components.domain.inventory import CardsOfANode, advertised_resources, node_devices
from components.domain.names import MOCK_GPU_NODE_LABEL, gpu_model_label, pool_labels
from components.kube.client import get_json, http_status, send

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

# The node shape of KWOK's own examples; pods are bounded by the GPU slots long before.
NODE_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110"}
PARALLEL_REQUESTS = 16


def selector(tenant: str, pool: str) -> str:
    return ",".join(f"{k}={v}" for k, v in pool_labels(tenant, pool, POOL_KWOK).items())


def node_object(name: str, tenant: str, pool: str, fleet: CardsOfANode) -> dict[str, Any]:
    """The Node as created: labels and annotations (HAMi's register first, capacity after)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": POOL_KWOK,
                "kubernetes.io/hostname": name,
                "kubernetes.io/role": "agent",
                **pool_labels(tenant, pool, POOL_KWOK),
                **gpu_model_label(fleet.model),
                GPU_NODE_LABEL[0]: GPU_NODE_LABEL[1],
                MOCK_GPU_NODE_LABEL[0]: MOCK_GPU_NODE_LABEL[1],
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1],
                NODE_REGISTER: encode_node_register(node_devices(tenant, name, fleet)),
            },
        },
        "spec": {},
    }


def node_status(fleet: CardsOfANode) -> dict[str, Any]:
    """Capacity as a docker worker with the mock plugin shows it (KWOK keeps what is set)."""
    resources = {**NODE_RESOURCES, **advertised_resources(fleet)}
    return {"status": {"capacity": resources, "allocatable": resources}}


def _each(names: Iterable[str], work: Callable[[str], None]) -> None:
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for future in [pool.submit(work, n) for n in names]:
            future.result()


def ensure_nodes(core: CoreV1Api, names: list[str], tenant: str, pool: str, fleet: CardsOfANode) -> None:
    """Create the nodes (or bring existing ones back to their labels and annotations), then set
    their capacity. Idempotent, so an interrupted update is finished by the next."""
    status = node_status(fleet)

    def one(name: str) -> None:
        body = node_object(name, tenant, pool, fleet)
        try:
            send(core.create_node, body)
        except Exception as exc:
            if http_status(exc) != 409:
                raise
            send(core.patch_node, name, {"metadata": body["metadata"]})
        send(core.patch_node_status, name, status)

    _each(names, one)


def pool_nodes(core: CoreV1Api, tenant: str, pool: str) -> set[str]:
    """The names of the pool's nodes as they are now (found by its labels)."""
    found = get_json(core.list_node, label_selector=selector(tenant, pool))
    return {n["metadata"]["name"] for n in found.get("items") or []}


def delete_nodes(core: CoreV1Api, tenant: str, pool: str, keep: Iterable[str] = ()) -> list[str]:
    """Delete the pool's nodes (found by its labels, so nothing else is touched) except `keep`."""
    kept = set(keep)
    doomed = sorted(pool_nodes(core, tenant, pool) - kept)

    def one(name: str) -> None:
        try:
            send(core.delete_node, name)
        except Exception as exc:
            if http_status(exc) != 404:
                raise

    _each(doomed, one)
    return doomed
