"""Stand-in for HAMi's Bind, for tests that cannot run HAMi's scheduler (its Go module is not
served to these machines). It writes exactly what HAMi v2.8+ writes when it binds a GPU pod:
the node lock `<RFC3339>,<ns>,<pod>`, the pod's vgpu-node / bind-phase allocating / bind-time
annotations, then the Binding. What it does NOT do is HAMi's scheduling decision."""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from datetime import UTC, datetime

from kubernetes import client

from components.domain import hami_annotations as ha
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.kube.waiting import TimedOut, wait_until
from tests.support.gpu_pods import create_gpu_pod
from tests.support.waits import settles


def hami_bind(core: client.CoreV1Api, namespace: str, pod: str, node: str, phase: str = ha.PHASE_ALLOCATING) -> float:
    """Bind like HAMi's Bind; returns the time.monotonic() of the moment the pod is bound.
    `phase` failed stands for a device plugin that reported the allocation failed."""
    lock = ha.encode_node_lock(ha.NodeLock(datetime.now(UTC), namespace, pod))
    core.patch_node(node, {"metadata": {"annotations": {ha.NODE_LOCK: lock}}})
    core.patch_namespaced_pod(
        pod,
        namespace,
        {
            "metadata": {
                "annotations": {
                    ha.VGPU_NODE: node,
                    ha.BIND_PHASE: phase,
                    ha.BIND_TIME: str(int(time.time())),
                }
            }
        },
    )
    core.create_namespaced_pod_binding(
        pod,
        namespace,
        client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod), target=client.V1ObjectReference(kind="Node", name=node)
        ),
        _preload_content=False,
    )
    return time.monotonic()


def wait_for_pod(core: client.CoreV1Api, namespace: str, pod: str, timeout: float = 120) -> None:
    def created() -> bool:
        try:
            return bool(core.read_namespaced_pod(pod, namespace))
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            return False

    if not settles(created, timeout=timeout, interval=0.2):
        raise TimeoutError(f"pod {namespace}/{pod} was not created within {timeout} s")


def wait_lock_free(core: client.CoreV1Api, node: str, timeout: float = 60) -> float:
    def free() -> float | None:
        return time.monotonic() if ha.NODE_LOCK not in (core.read_node(node).metadata.annotations or {}) else None

    with suppress(TimedOut):
        return wait_until(free, timeout=timeout, interval=0.05)
    raise TimeoutError(f"lock on {node} not released within {timeout} s")


# kube-scheduler 1.35's condition message when HAMi 2.10 refuses a pod on its only node (HAMi
# 2.8.3 says `1 NodeUnfitPod` there and names the reason in its own events).
SCHEDULER_SAYS = (
    "0/1 nodes are available: 1 1/1 {}. preemption: 0/1 nodes are available: 1 No preemption victims found "
    "for incoming pod."
)


def mark_unschedulable(core: client.CoreV1Api, namespace: str, pod: str, message: str) -> None:
    """Write the PodScheduled=False condition kube-scheduler writes for a pod that does not fit."""
    core.patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ]
            }
        },
    )


def hami_event(core: client.CoreV1Api, namespace: str, pod: str, reason: str, message: str) -> None:
    """An event as HAMi's scheduler records it on a pod (component hami-scheduler, Warning)."""
    uid = core.read_namespaced_pod(pod, namespace).metadata.uid
    now = datetime.now(UTC)
    core.create_namespaced_event(
        namespace,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{pod}."),
            involved_object=client.V1ObjectReference(kind="Pod", namespace=namespace, name=pod, uid=uid),
            reason=reason,
            message=message,
            type="Warning",
            source=client.V1EventSource(component="hami-scheduler"),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        ),
    )


def new_pod(core: client.CoreV1Api, namespace: str, name: str, scheduler: str | None = None) -> None:
    """A plain pod, created with the API client as a team would (not by the stack)."""
    create_gpu_pod(core, namespace, name, 8000, 10, scheduler=scheduler)


def wait_released(core: client.CoreV1Api, namespace: str, pod: str, node: str, timeout: float = 30) -> float:
    """Until the pod's bind-phase is success and the node holds no lock; returns monotonic time."""

    def released() -> float | None:
        phase = (core.read_namespaced_pod(pod, namespace).metadata.annotations or {}).get(ha.BIND_PHASE)
        if phase == ha.PHASE_SUCCESS and ha.NODE_LOCK not in (core.read_node(node).metadata.annotations or {}):
            return time.monotonic()
        return None

    with suppress(TimedOut):
        return wait_until(released, timeout=timeout, interval=0.05)
    raise TimeoutError(f"{namespace}/{pod} not released on {node} within {timeout} s")


class StandInBinder:
    """Binds every pod that asks for HAMi's scheduler, one at a time (each after the previous
    pod's lock is released), as HAMi's Bind leaves it: for the engine tests of workloads on
    clusters that run no HAMi. No scheduling decision: every pod fits. To `node`, or, without
    one, to the first (by name) Ready, schedulable mock-GPU node there is at that moment.
    `paused` stands for a HAMi that places nothing (its scheduler down)."""

    def __init__(self, core: client.CoreV1Api, node: str | None = None):
        self.core, self.node = core, node
        self.paused = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> StandInBinder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _target(self) -> str | None:
        if self.node:
            return self.node
        selector = f"{MOCK_GPU_NODE_LABEL[0]}={MOCK_GPU_NODE_LABEL[1]}"
        for node in sorted(self.core.list_node(label_selector=selector).items, key=lambda n: n.metadata.name):
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            if ready and not node.spec.unschedulable and not node.metadata.deletion_timestamp:
                return node.metadata.name
        return None

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pod in self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=").items:
                if self.paused or pod.spec.scheduler_name != ha.SCHEDULER_NAME or pod.metadata.deletion_timestamp:
                    continue
                with suppress(client.ApiException, TimeoutError):
                    node = self._target()
                    if node is None:
                        continue
                    wait_lock_free(self.core, node, timeout=30)
                    hami_bind(self.core, pod.metadata.namespace, pod.metadata.name, node)
