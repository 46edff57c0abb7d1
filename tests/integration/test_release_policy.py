"""The release controller's writes, narrowed by its admission policies (components/
controllers/release/policy.py) on a real kube-apiserver: as its own ServiceAccount, with its RBAC rules, it
may remove HAMi's node lock and set bind-phase success, and the controller releases a pod that
way; it may delete a pod it is told to make again only once a kubelet refused it at admission,
and create only that pod, for the scheduler, without host access; every other change to a node
or a pod is refused with a message naming the rule. Other users (HAMi, the admin) are not affected."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import pytest
from kubernetes import client

from components.controllers.release import controller as rc
from components.controllers.release import policy as release_policy
from components.controllers.release import readmit
from components.domain import hami_annotations as ha
from components.domain.names import WORKLOAD_LABEL
from components.kube.client import core_api, get_json
from tests.support.cluster import start_cluster
from tests.support.hami_stand_in import hami_bind, new_pod, wait_released
from tests.support.release_account import release_account
from tests.support.tools import require
from tests.support.waits import settles

pytestmark = pytest.mark.integration
# The bare pods the controller is told to make again (the stack's `kind: Pod` workloads).
READMIT = ("default/readmit-a", "default/readmit-b")


@pytest.fixture(scope="module")
def cluster(tools):
    """An API server of this module's own that allows privileged containers, as a tenant's does
    (kubeadm's default): a privileged pod is then refused by the policies, not by validation."""
    require(tools, "kube-apiserver", "etcd", "openssl")
    c = start_cluster(tools, api_args=["--allow-privileged=true"])
    yield c
    c.stop()


@pytest.fixture(scope="module")
def releaser(cluster):
    """A CoreV1Api as the controller's ServiceAccount, its RBAC and write policies in place."""
    with release_account(cluster, f"https://127.0.0.1:{cluster.port}", READMIT) as kubeconfig:
        yield core_api(kubeconfig)


def refused(call, *args) -> str:
    with pytest.raises(client.ApiException) as info:
        call(*args)
    assert info.value.status == 422, info.value.body
    return info.value.body


def lock_value(pod: str, ns: str = "default") -> str:
    return ha.encode_node_lock(ha.NodeLock(datetime.now(UTC), ns, pod))


NODE_CHANGES = {
    "a label": ({"metadata": {"labels": {"gpu-tenancy/mock-gpu": "false"}}}, "its labels"),
    "a taint": ({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}, "its spec"),
    "unschedulable": ({"spec": {"unschedulable": True}}, "its spec"),
    "another annotation": ({"metadata": {"annotations": {"other": "x"}}}, "may only remove"),
    "HAMi's register annotation": ({"metadata": {"annotations": {ha.NODE_REGISTER: None}}}, "may only remove"),
    "a new lock": ({"metadata": {"annotations": {ha.NODE_LOCK: "2026-01-01T00:00:00Z,x,y"}}}, "may only remove"),
    "a finalizer": ({"metadata": {"finalizers": ["example.com/hold"]}}, "its finalizers"),
}


@pytest.mark.parametrize("change", NODE_CHANGES)
def test_any_other_node_change_is_refused(cluster, releaser, node, change):
    core = cluster.core()
    core.patch_node(node, {"metadata": {"annotations": {ha.NODE_REGISTER: "[]", ha.NODE_LOCK: lock_value("p")}}})
    patch, rule = NODE_CHANGES[change]
    body = refused(releaser.patch_node, node, patch)
    assert rule in body and "the release controller" in body
    core.patch_node(node, {"metadata": {"labels": {"admin": "may"}}})  # the admin is not narrowed


POD_CHANGES = {
    "a label": ({"metadata": {"labels": {"x": "y"}}}, "its labels"),
    "another annotation": ({"metadata": {"annotations": {"other": "x"}}}, "may only set"),
    "HAMi's node annotation": ({"metadata": {"annotations": {ha.VGPU_NODE: "elsewhere"}}}, "may only set"),
    "HAMi's allocated devices": ({"metadata": {"annotations": {ha.DEVICES_ALLOCATED: None}}}, "may only set"),
    "bind-phase failed": ({"metadata": {"annotations": {ha.BIND_PHASE: ha.PHASE_FAILED}}}, "to success"),
    "its image": ({"spec": {"containers": [{"name": "c", "image": "evil"}]}}, "its spec"),
    "a finalizer": ({"metadata": {"finalizers": ["example.com/hold"]}}, "its finalizers"),
}


@pytest.mark.parametrize("change", POD_CHANGES)
def test_any_other_pod_change_is_refused(cluster, releaser, change):
    core = cluster.core()
    name = f"pol-{uuid.uuid4().hex[:6]}"
    new_pod(core, "default", name)
    notes = {ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.DEVICES_ALLOCATED: "GPU-0,NVIDIA,8000,10:;"}
    core.patch_namespaced_pod(name, "default", {"metadata": {"annotations": notes}})
    patch, rule = POD_CHANGES[change]
    body = refused(releaser.patch_namespaced_pod, name, "default", patch)
    assert rule in body
    core.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_what_the_release_needs_is_allowed(cluster, releaser, node):
    core = cluster.core()
    name = f"pol-{uuid.uuid4().hex[:6]}"
    new_pod(core, "default", name)
    # HAMi's Filter writes the devices to allocate; its device plugin erases them container by container
    core.patch_namespaced_pod(
        name, "default", {"metadata": {"annotations": {ha.DEVICES_TO_ALLOCATE: "GPU-0,NVIDIA,8000,10:;"}}}
    )
    hami_bind(core, "default", name, node)
    releaser.patch_node(node, {"metadata": {"annotations": {ha.NODE_LOCK: None}}})
    notes = {ha.BIND_PHASE: ha.PHASE_SUCCESS, ha.DEVICES_TO_ALLOCATE: ";"}
    releaser.patch_namespaced_pod(name, "default", {"metadata": {"annotations": notes}})
    assert core.read_namespaced_pod(name, "default").metadata.annotations[ha.BIND_PHASE] == ha.PHASE_SUCCESS


def test_the_controller_releases_through_the_policies(cluster, releaser, node):
    core = cluster.core()
    controller = rc.ReleaseController(releaser, namespace="default", backoff_max=1.0)
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    try:
        assert controller.synced.wait(30)
        for i in range(3):
            name = f"pol-rel-{i}-{uuid.uuid4().hex[:4]}"
            new_pod(core, "default", name)
            hami_bind(core, "default", name, node)
            wait_released(core, "default", name, node, timeout=15)
        value = controller.metrics.registry.get_sample_value
        assert not value("gpu_tenancy_pods_not_handled_total", {"reason": "refused-422"})
    finally:
        controller.stop()
        thread.join(15)


def event(pod: str, uid: str, **changes) -> dict:
    body = {
        "metadata": {"generateName": f"{pod}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": pod, "uid": uid},
        "reason": release_policy.STUCK_REASON,
        "message": "still allocating",
        "type": "Warning",
        "source": {"component": release_policy.EVENT_SOURCE},
    }
    for key, value in changes.items():
        body[key] = {**body[key], **value} if isinstance(value, dict) else value
    return body


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"involvedObject": {"kind": "Node", "apiVersion": "v1", "namespace": ""}}, "about a pod"),
        ({"reason": "NodeNotReady"}, "may only post Warning Events"),
        ({"type": "Normal"}, "may only post Warning Events"),
        ({"source": {"component": "kubelet"}}, "may only post Warning Events"),
    ],
)
def test_the_controller_posts_only_its_own_events_about_pods(cluster, releaser, change, rule):
    pod = f"ev-{uuid.uuid4().hex[:6]}"
    new_pod(cluster.core(), "default", pod)
    uid = cluster.core().read_namespaced_pod(pod, "default").metadata.uid
    releaser.create_namespaced_event("default", event(pod, uid))
    assert rule in refused(releaser.create_namespaced_event, "default", event(pod, uid, **change))


LIMITS = {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "25"}


def declared(name: str, node: str | None = None, **spec) -> dict:
    """A stack-declared bare GPU pod, as GpuWorkload makes it (bound to `node` when given)."""
    body = {
        "metadata": {"name": name, "labels": {WORKLOAD_LABEL: name}, "annotations": {ha.USE_GPU_TYPE: "L4"}},
        "spec": {
            "schedulerName": ha.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"limits": {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "25"}},
                }
            ],
            **spec,
        },
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def refused_by_kubelet(core, name: str, node: str) -> dict:
    """The pod as a restarted kubelet leaves it: placed by HAMi, then Failed at admission."""
    core.create_namespaced_pod("default", declared(name, node))
    core.patch_namespaced_pod(name, "default", {"metadata": {"annotations": {ha.VGPU_NODE: node}}})
    status = {"phase": "Failed", "reason": readmit.REFUSED_REASON, "message": "no healthy devices"}
    core.patch_namespaced_pod_status(name, "default", {"status": status})
    return get_json(core.read_namespaced_pod, name, "default")


def gone(core, name: str) -> None:
    core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    assert settles(lambda: name not in {p.metadata.name for p in core.list_namespaced_pod("default").items}, timeout=30)


def test_a_refused_declared_pod_is_made_again_through_the_policies(cluster, releaser, node):
    core = cluster.core()
    core.patch_node_status(
        node,
        {
            "status": {
                "capacity": {ha.RES_GPUMEM: "92136", ha.RES_GPUCORES: "400"},
                "allocatable": {ha.RES_GPUMEM: "92136", ha.RES_GPUCORES: "400"},
            }
        },
    )
    before = refused_by_kubelet(core, "readmit-a", node)
    controller = rc.ReleaseController(releaser, namespace="default", readmit=readmit.parse(READMIT))
    controller.relist()
    controller.drain()
    after = core.read_namespaced_pod("readmit-a", "default")
    assert after.metadata.uid != before["metadata"]["uid"] and after.spec.node_name is None
    assert after.spec.scheduler_name == ha.SCHEDULER_NAME and after.metadata.labels == {WORKLOAD_LABEL: "readmit-a"}
    assert after.metadata.annotations == {ha.USE_GPU_TYPE: "L4"}
    value = controller.metrics.registry.get_sample_value
    assert value("gpu_tenancy_pods_readmitted_total", {"outcome": readmit.MADE_AGAIN}) == 1
    gone(core, "readmit-a")


CREATES = {
    "a pod it is not told of": (declared("someone-elses"), "may only create the pods"),
    "a pod bound to a node": ("node", "no nodeName"),
    "a pod without the workload label": (
        {**declared("readmit-b"), "metadata": {"name": "readmit-b"}},
        "labelled gpu-tenancy/workload",
    ),
    "a pod with HAMi's placement": (
        {
            **declared("readmit-b"),
            "metadata": {"name": "readmit-b", "labels": {WORKLOAD_LABEL: "x"}, "annotations": {ha.VGPU_NODE: "gpu-0"}},
        },
        "without hami.io/ annotations",
    ),
    "the host's network": (declared("readmit-b", hostNetwork=True), "host namespace"),
    "the host's PIDs": (declared("readmit-b", hostPID=True), "host namespace"),
    "a host path": (declared("readmit-b", volumes=[{"name": "h", "hostPath": {"path": "/"}}]), "host path"),
    "a privileged container": (
        declared("readmit-b", containers=[{"name": "c", "image": "x", "securityContext": {"privileged": True}}]),
        "privileged",
    ),
    "a privileged init container": (
        declared("readmit-b", initContainers=[{"name": "i", "image": "x", "securityContext": {"privileged": True}}]),
        "privileged",
    ),
    "another ServiceAccount": (declared("readmit-b", serviceAccountName="admin"), "default ServiceAccount"),
}


@pytest.mark.parametrize("case", CREATES)
def test_it_creates_no_other_pod(cluster, releaser, node, case):
    body, rule = CREATES[case]
    if body == "node":
        body = declared("readmit-b", node)
    message = refused(releaser.create_namespaced_pod, "default", body)
    assert rule in message and "the release controller" in message


def test_it_deletes_a_told_pod_only_once_refused_at_admission_and_no_other(cluster, releaser, node):
    core = cluster.core()
    core.create_namespaced_pod("default", declared("readmit-b", node))
    assert "refused at admission" in refused(releaser.delete_namespaced_pod, "readmit-b", "default")
    evicted = {"phase": "Failed", "reason": "Evicted", "message": "x"}
    core.patch_namespaced_pod_status("readmit-b", "default", {"status": evicted})
    assert "refused at admission" in refused(releaser.delete_namespaced_pod, "readmit-b", "default")
    gone(core, "readmit-b")
    refused_by_kubelet(core, "someone-elses", node)
    assert "may only delete the pods" in refused(releaser.delete_namespaced_pod, "someone-elses", "default")
    gone(core, "someone-elses")
