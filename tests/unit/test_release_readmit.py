"""A stack-declared bare GPU pod a restarted worker's kubelet refused at admission is made again
by the release controller (components/controllers/release/readmit.py), on a fake API client: only the
pods it is told of, only once the node offers the devices again (or is gone), only when the copy
would be admitted, by the same name and spec, placed afresh. The admission policies that narrow
these writes are judged by a real API server in tests/integration/test_release_policy.py."""

from __future__ import annotations

import logging

import pytest

from components.controllers.release import controller as rc
from components.controllers.release import lock as lr
from components.controllers.release import readmit as rd
from components.domain import hami_annotations as ha
from components.domain.inventory import offers
from components.domain.names import MOCK_GPU_NODE_LABEL, WORKLOAD_LABEL
from tests.support.fake_kube import FakeCore
from tests.support.waits import settles

NS, NAME, NODE = "inference", "inference-l4", "gpu-0"
LIMITS = {ha.RES_GPU: "1", ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "25", "cpu": "1"}


def refused_pod(core: FakeCore, name: str = NAME, node: str = NODE, reason: str = rd.REFUSED_REASON) -> dict:
    pod = core.add_pod(
        NS,
        name,
        {
            ha.BIND_PHASE: ha.PHASE_SUCCESS,
            ha.VGPU_NODE: node,
            ha.DEVICES_ALLOCATED: "GPU-0,NVIDIA,8000,25:;",
            ha.USE_GPU_TYPE: "L4",
        },
        node=node,
        scheduler=ha.SCHEDULER_NAME,
    )
    stored = core.pods[(NS, name)]
    stored["metadata"]["labels"] = {WORKLOAD_LABEL: name}
    stored["spec"] = {
        "nodeName": node,
        "schedulerName": ha.SCHEDULER_NAME,
        "serviceAccountName": "default",
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"limits": dict(LIMITS)},
                "volumeMounts": [
                    {"name": "kube-api-access-x1y2z", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"name": "data", "mountPath": "/data"},
                ],
            }
        ],
        "volumes": [{"name": "kube-api-access-x1y2z", "projected": {}}, {"name": "data", "emptyDir": {}}],
    }
    stored["status"] = {"phase": "Failed", "reason": reason, "message": "Allocate failed: no healthy devices"}
    assert stored["metadata"]["uid"] == pod["metadata"]["uid"]
    return core.pod(NS, name)


def gpu_node(core: FakeCore, offered: bool) -> None:
    core.add_node(NODE, labels=dict([MOCK_GPU_NODE_LABEL]))
    value = "10" if offered else "0"
    core.nodes[NODE]["status"] = {
        "allocatable": {ha.RES_GPU: value, ha.RES_GPUMEM: "92136" if offered else "0", ha.RES_GPUCORES: value}
    }


def test_keys_are_namespace_slash_name():
    assert rd.parse(["a/b", "c/d", "a/b"]) == {("a", "b"), ("c", "d")}
    for bad in ("ab", "/b", "a/", "a/b/c"):
        with pytest.raises(ValueError, match="NAMESPACE/NAME"):
            rd.parse([bad])


def test_only_a_kubelets_admission_refusal_counts():
    assert rd.refused_at_admission({"status": {"phase": "Failed", "reason": rd.REFUSED_REASON}})
    for status in (
        {"phase": "Failed", "reason": "Evicted"},
        {"phase": "Failed"},
        {"phase": "Running", "reason": rd.REFUSED_REASON},
        {},
    ):
        assert not rd.refused_at_admission({"status": status})


def test_the_copy_is_the_declared_pod_placed_afresh():
    core = FakeCore()
    fresh = rd.fresh_copy(refused_pod(core))
    assert fresh["metadata"] == {
        "name": NAME,
        "namespace": NS,
        "labels": {WORKLOAD_LABEL: NAME},
        "annotations": {ha.USE_GPU_TYPE: "L4"},  # the user's card choice stays, HAMi's placement goes
    }
    spec = fresh["spec"]
    assert "nodeName" not in spec and spec["schedulerName"] == ha.SCHEDULER_NAME
    assert spec["volumes"] == [{"name": "data", "emptyDir": {}}]  # admission adds the token volume again
    assert spec["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert spec["containers"][0]["resources"]["limits"] == LIMITS
    assert "status" not in fresh and "uid" not in fresh["metadata"]


def test_only_device_plugin_resources_are_waited_for():
    pod = {"spec": {"containers": [{"resources": {"limits": LIMITS}}, {"resources": {}}]}}
    assert rd.extended_limits(pod) == {ha.RES_GPU, ha.RES_GPUMEM, ha.RES_GPUCORES}
    assert offers({"status": {"allocatable": {ha.RES_GPU: "4", ha.RES_GPUMEM: "1"}}}, [ha.RES_GPU, ha.RES_GPUMEM])
    assert not offers({"status": {"allocatable": {ha.RES_GPU: "4", ha.RES_GPUMEM: "0"}}}, [ha.RES_GPUMEM])
    assert not offers({"status": {}}, [ha.RES_GPU])


def test_made_again_by_name_once_the_node_offers_the_devices():
    core = FakeCore()
    gpu_node(core, offered=False)
    pod = refused_pod(core)
    with pytest.raises(rd.NotYet, match=ha.RES_GPUMEM):
        rd.readmit(core, pod)
    assert core.pods[(NS, NAME)]["metadata"]["uid"] == pod["metadata"]["uid"]  # nothing touched
    gpu_node(core, offered=True)
    assert rd.readmit(core, pod) == rd.MADE_AGAIN
    again = core.pod(NS, NAME)
    assert again["metadata"]["uid"] != pod["metadata"]["uid"] and "nodeName" not in again["spec"]
    verbs = [v for v, _ in core.calls if "pod" in v]
    assert verbs == ["create_namespaced_pod(dry-run)", "delete_namespaced_pod", "create_namespaced_pod"]


def test_a_node_gone_does_not_hold_it_back():
    core = FakeCore()
    assert rd.readmit(core, refused_pod(core, node="gone-0")) == rd.MADE_AGAIN


@pytest.mark.parametrize("status", [403, 422])
def test_a_copy_that_would_be_refused_leaves_the_refused_pod_as_it_is(status):
    core = FakeCore()
    gpu_node(core, offered=True)
    pod = refused_pod(core)
    core.fail("create_namespaced_pod(dry-run)", f"{NS}/{NAME}", status)
    with pytest.raises(lr.Refused):
        rd.readmit(core, pod)
    assert core.pods[(NS, NAME)]["metadata"]["uid"] == pod["metadata"]["uid"]
    assert ("delete_namespaced_pod", f"{NS}/{NAME}") not in core.calls


def test_a_pod_replaced_meanwhile_is_not_ours():
    core = FakeCore()
    gpu_node(core, offered=True)
    pod = refused_pod(core)
    core.pods[(NS, NAME)]["metadata"]["uid"] = "someone-elses"  # `up` made it again first
    assert rd.readmit(core, pod) == rd.GONE
    assert core.pods[(NS, NAME)]["metadata"]["uid"] == "someone-elses"


def test_a_create_that_fails_after_the_delete_is_retried():
    core = FakeCore()
    gpu_node(core, offered=True)
    pod = refused_pod(core)
    core.fail("create_namespaced_pod", f"{NS}/{NAME}", 503, times=2)
    assert rd.readmit(core, pod, create_seconds=10) == rd.MADE_AGAIN
    assert (NS, NAME) in core.pods


def controller(core: FakeCore, **kwargs) -> rc.ReleaseController:
    return rc.ReleaseController(core, **{"pod_backoff_max": 0.05, **kwargs})


def test_the_controller_makes_again_only_the_pods_it_is_told_of():
    core = FakeCore()
    gpu_node(core, offered=True)
    told = refused_pod(core)
    other = refused_pod(core, name="someone-elses-pod")
    evicted = refused_pod(core, name="evicted", reason="Evicted")
    c = controller(core, readmit={(NS, NAME), (NS, "evicted")})
    c.relist()
    c.drain()
    assert core.pod(NS, NAME)["metadata"]["uid"] != told["metadata"]["uid"]
    assert core.pod(NS, "someone-elses-pod")["metadata"]["uid"] == other["metadata"]["uid"]
    assert core.pod(NS, "evicted")["metadata"]["uid"] == evicted["metadata"]["uid"]
    assert c.metrics.registry.get_sample_value("gpu_tenancy_pods_readmitted_total", {"outcome": rd.MADE_AGAIN}) == 1
    # the new pod is not refused: nothing more to do for it
    c.relist()
    assert (NS, NAME) not in c._pods


def test_the_controller_waits_for_the_node_with_the_pods_own_backoff(caplog):
    caplog.set_level(logging.INFO)
    core = FakeCore()
    gpu_node(core, offered=False)
    pod = refused_pod(core)
    c = controller(core, readmit={(NS, NAME)})
    c.relist()
    c.drain()
    assert core.pod(NS, NAME)["metadata"]["uid"] == pod["metadata"]["uid"]
    assert (NS, NAME) in c._pods and c.healthy()
    assert "to be made again" in caplog.text
    gpu_node(core, offered=True)
    c.start_workers()
    try:
        assert settles(lambda: core.pod(NS, NAME)["metadata"]["uid"] != pod["metadata"]["uid"], timeout=5)
    finally:
        c.stop()
