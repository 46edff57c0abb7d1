"""The Node a docker worker registered, told from any other by its machine ID: the membership
waits for it, and removes it only while it is still that worker's. A replaced worker's clean-up
never removes its successor, which registers under the same name with a machine ID of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.kube.client import get_json_or_none, http_status, send
from components.kube.waiting import TimedOut, retry_on_conflict, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api


class NodeNotRegisteredError(Exception):
    """The worker's kubelet did not register its Node in time."""


def _node(core: CoreV1Api, name: str) -> dict[str, Any] | None:
    return get_json_or_none(core.read_node, name)


def machine_id(node: dict[str, Any]) -> str:
    return ((node.get("status") or {}).get("nodeInfo") or {}).get("machineID", "")


def wait_for_node(core: CoreV1Api, name: str, machine: str, timeout: float, interval: float = 2.0) -> str:
    """Wait until the worker's kubelet has registered Node `name` with its machine ID; its uid."""
    last: dict[str, Any] = {}

    def registered() -> str:
        node = last["node"] = _node(core, name)
        return node["metadata"]["uid"] if node is not None and machine_id(node) == machine else ""

    try:
        return wait_until(registered, timeout=timeout, interval=interval, what=f"node {name}")
    except TimedOut:
        node = last.get("node")
        found = f"a Node with machine ID {machine_id(node)!r}" if node else "no Node"
        raise NodeNotRegisteredError(
            f"node {name}: {found} after {timeout:g} s, expected machine ID {machine!r}: "
            "the kubelet in the worker container did not register "
            "(see `docker exec <worker> journalctl -u kubelet`)"
        ) from None


def delete_node_if_mine(core: CoreV1Api, name: str, machine: str) -> str:
    """Delete Node `name` only while it is the worker's own (same machine ID); the delete carries
    the Node's resourceVersion, so a successor registering meanwhile is never removed.
    Returns "deleted", "absent" or "successor"."""

    def attempt() -> str:
        node = _node(core, name)
        if node is None:
            return "absent"
        if machine_id(node) != machine:
            return "successor"
        rv = node["metadata"]["resourceVersion"]
        body = {"preconditions": {"resourceVersion": rv, "uid": node["metadata"]["uid"]}}
        try:
            send(core.delete_node, name, body=body)
        except Exception as exc:
            if http_status(exc) == 404:
                return "absent"
            raise  # a 409: the Node changed since the read; retry_on_conflict looks again
        return "deleted"

    return retry_on_conflict(attempt)
