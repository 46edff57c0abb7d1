"""Whether a tenant of the team's own machines has one its system pods can run on.

A tenant whose pools are all `external` has no node until the team joins its machines with the
configuration the stack outputs; HAMi's scheduler, CoreDNS and the Konnectivity agent (which
carries the path to HAMi's webhook) can only run on one of them. So before HAMi, the stack asks:
no machine registered at all is a state said at once, with what to do; machines registered but
none Ready are waited for, and named with their kubelet's reason if none becomes Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components.config.model import POOL_EXTERNAL
from components.domain.names import POOL_LABEL, POOL_MODE_LABEL, TENANT_LABEL
from components.kube.client import get_json
from components.kube.waiting import TimedOut, wait_until
from components.lifecycle.node_handover import node_ready

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api


class NoMachineJoinedError(Exception):
    """No machine of the tenant's external pools has registered its Node yet."""


class NoMachineReadyError(Exception):
    """Machines registered, but none became Ready in time."""


def machines(core: CoreV1Api, tenant: str) -> list[dict[str, Any]]:
    """The Nodes of the tenant's external pools (their join labelled them so)."""
    selector = f"{TENANT_LABEL}={tenant},{POOL_MODE_LABEL}={POOL_EXTERNAL}"
    return get_json(core.list_node, label_selector=selector).get("items") or []


def ready_condition(node: Mapping[str, Any]) -> Mapping[str, Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def ready_names(nodes: list[dict[str, Any]]) -> list[str]:
    """The names of the Ready ones among `nodes`, sorted."""
    return sorted(n["metadata"]["name"] for n in nodes if node_ready(n))


def _not_ready_why(node: Mapping[str, Any]) -> str:
    """`<name> (pool <pool>): <kubelet's reason>[: <message>]`."""
    condition = ready_condition(node)
    pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL, "?")
    message = f": {condition['message']}" if condition.get("message") else ""
    return f"{node['metadata']['name']} (pool {pool}): {condition.get('reason') or 'no Ready condition'}{message}"


def join_hint(tenant: str) -> str:
    return (
        f"join each machine with its pool's configuration (`pulumi stack output {tenant} --show-secrets`: "
        f"pools.<pool>.join; docs/worker-pools.md), then run `pulumi up` again"
    )


def wait_for_machine(
    core: CoreV1Api, tenant: str, pools: Mapping[str, int], timeout: float, interval: float = 3.0
) -> list[str]:
    """The Ready machines' names, once there is one; NoMachineJoinedError at once when none has
    registered, NoMachineReadyError naming each machine and its kubelet's reason after `timeout`."""
    found = machines(core, tenant)
    if not found:
        counts = ", ".join(f"pool {pool}: 0 of {n}" for pool, n in pools.items())
        raise NoMachineJoinedError(
            f"tenant {tenant}: no machine of its own has joined yet ({counts}). HAMi's scheduler, CoreDNS and "
            f"the Konnectivity agent run on those machines, so HAMi and the GPU workloads wait for one: "
            f"{join_hint(tenant)}"
        )

    def ready() -> list[str]:
        nodes = machines(core, tenant)
        seen["nodes"] = nodes
        return ready_names(nodes)

    seen: dict[str, list[dict[str, Any]]] = {"nodes": found}
    try:
        return wait_until(ready, timeout=timeout, interval=interval, what=f"a Ready machine of tenant {tenant}")
    except TimedOut:
        said = "; ".join(_not_ready_why(n) for n in seen["nodes"])
        raise NoMachineReadyError(
            f"tenant {tenant}: its machines joined but none became Ready within {timeout:g} s: {said}. A machine "
            "needs its pod network and its kubelet running; HAMi and the GPU workloads wait for one"
        ) from None
