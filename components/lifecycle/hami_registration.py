"""Has HAMi's scheduler registered the cards of the tenant's nodes, and do their kubelets offer them?

HAMi registers a node's cards on a 15 s ticker (v2.8.3: only once `nvidia.com/gpu` allocatable
is non-zero). A GPU pod created before that is refused, and kube-scheduler retries it only on
a later cluster event or after 5 minutes. So workloads wait for this check: HAMi's own metrics,
read through the tenant API server's service proxy (the same Konnectivity path the webhook
needs), list one sample per registered card. 2.8.3 names it `GPUDeviceMemoryLimit{nodeid,
deviceuuid}`, 2.10 `hami_gpu_memory_limit_bytes{node, device_uuid}`; both are read.
HAMi takes a node's cards from its annotation (the stack writes it), not from the node's kubelet:
a GPU pod HAMi binds to a node whose device plugin has not registered yet (a worker just joined or
replaced) is refused by that kubelet at admission. So each node must also offer the plugin's
resources (allocatable nvidia.com/gpumem and gpucores > 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from components.domain.inventory import PLUGIN_RESOURCES, offers
from components.domain.names import HAMI_NAMESPACE, MOCK_GPU_NODE_LABEL
from components.kube.client import get_json, http_status, read_answer
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

# The chart's scheduler Service and its metrics port name.
METRICS_SERVICE = "hami-scheduler:monitor"
# (metric, node label, device label) per HAMi version.
DEVICE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("GPUDeviceMemoryLimit", "nodeid", "deviceuuid"),
    ("hami_gpu_memory_limit_bytes", "node", "device_uuid"),
)


class NotRegisteredError(Exception):
    """HAMi's scheduler did not register every expected card in time."""


def parse_registered(text: str) -> dict[str, set[str]]:
    """Cards per node in HAMi's metrics text (both metric generations)."""
    found: dict[str, set[str]] = {}
    wanted = {name: (node, dev) for name, node, dev in DEVICE_METRICS}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                node_label, dev_label = wanted[sample.name]
                node, dev = sample.labels.get(node_label), sample.labels.get(dev_label)
                if node and dev:
                    found.setdefault(node, set()).add(dev)
    return found


def registered(core: CoreV1Api, namespace: str = HAMI_NAMESPACE, service: str = METRICS_SERVICE) -> dict[str, set[str]]:
    """Read HAMi's metrics through the API server's service proxy."""
    return parse_registered(
        read_answer(core.connect_get_namespaced_service_proxy_with_path, service, namespace, "metrics").decode()
    )


def missing(expected: Mapping[str, Sequence[str]], found: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Expected cards (by node) HAMi does not list yet."""
    out = {}
    for node, devices in expected.items():
        absent = sorted(set(devices) - found.get(node, set()))
        if absent:
            out[node] = absent
    return out


def not_offered(core: CoreV1Api, nodes: Sequence[str]) -> list[str]:
    """The nodes whose kubelet does not offer the device plugin's resources (yet)."""
    listed = get_json(core.list_node, label_selector="=".join(MOCK_GPU_NODE_LABEL))
    ready = {(n.get("metadata") or {}).get("name") for n in listed.get("items", []) if offers(n)}
    return sorted(set(nodes) - ready)


def pods_on(core: CoreV1Api, node: str) -> str:
    """HAMi's pods on the node and where each stands (phase, a waiting container's reason), so a
    plugin that never registered says why: not scheduled there, pulling, crashing, running."""
    try:
        listed = get_json(core.list_namespaced_pod, HAMI_NAMESPACE, field_selector=f"spec.nodeName={node}")
    except Exception as exc:  # only a hint: the gate's own answer stands without it
        return f"its {HAMI_NAMESPACE} pods unreadable ({http_status(exc) or type(exc).__name__})"
    seen = []
    for pod in listed.get("items", []):
        status = pod.get("status") or {}
        waiting = [
            ((c.get("state") or {}).get("waiting") or {}).get("reason") for c in status.get("containerStatuses") or []
        ]
        why = ", ".join(w for w in waiting if w)
        seen.append(f"{(pod.get('metadata') or {}).get('name')} {status.get('phase')}{f' ({why})' if why else ''}")
    return f"its {HAMI_NAMESPACE} pods: {'; '.join(seen) or 'none'}"


def check(core: CoreV1Api, expected: Mapping[str, Sequence[str]]) -> tuple[dict[str, list[str]], str]:
    """One look: (missing cards by node, why: the metrics could not be read, a kubelet does not
    offer the cards yet, or '')."""
    try:
        absent = missing(expected, registered(core))
        waiting = [n for n in not_offered(core, list(expected)) if n not in absent]
        for node in waiting:
            absent[node] = list(expected[node])
        why = (
            f"HAMi lists the cards, but the kubelet of {', '.join(waiting)} does not offer "
            f"{' and '.join(PLUGIN_RESOURCES)} yet: the mock device plugin has not registered with it "
            f"(a GPU pod bound there now would be refused); " + "; ".join(f"{n}: {pods_on(core, n)}" for n in waiting)
            if waiting
            else ""
        )
        return absent, why
    except Exception as exc:
        status = http_status(exc)
        if status is None and not isinstance(exc, ValueError | OSError):
            raise
        why = getattr(exc, "reason", None) or str(exc)
        if status == 503:
            why = f"{why}: the hami-scheduler Service has no ready endpoint (scheduler pod not running or not leader)"
        return {node: list(devs) for node, devs in expected.items()}, f"HAMi's metrics unreadable ({status}: {why})"


def wait_registered(
    core: CoreV1Api, expected: Mapping[str, Sequence[str]], timeout: float, interval: float = 2.0
) -> dict[str, int]:
    """Wait until HAMi lists every expected card; returns cards per node, or raises naming the
    nodes still missing and the likely cause."""
    last: dict[str, Any] = {}

    def registered() -> bool:
        last["absent"], last["why"] = check(core, expected)
        return not last["absent"]

    try:
        wait_until(registered, timeout=timeout, interval=interval, what="HAMi's registration of the cards")
    except TimedOut:
        absent, why = last["absent"], last["why"]
        nodes = ", ".join(f"{n} ({len(d)} of {len(expected[n])} cards missing)" for n, d in sorted(absent.items()))
        cause = why or (
            "HAMi's scheduler has not taken these nodes' cards: check the node has status.allocatable "
            "nvidia.com/gpu > 0 and a valid hami.io/node-nvidia-register annotation (the fake inventory), "
            "and the hami-scheduler pod's log (kubectl -n hami-system logs deploy/hami-scheduler -c "
            "vgpu-scheduler-extender)"
        )
        raise NotRegisteredError(f"HAMi did not register node(s) {nodes} within {timeout:g} s. {cause}") from None
    return {node: len(devs) for node, devs in expected.items()}
