"""The drain's and the settle's decisions on plain pod objects (the real API server, Eviction API
and controllers are the integration tier's): what stays on a node, what leaves and who brings it
back, and what counts as placed again."""

import pytest

from components.domain import hami_annotations as ha
from components.lifecycle import node_handover as nh
from components.providers.node_handover import NodeDrainProvider, NodeSettledProvider


def pod(owner: str | None = None, node: str | None = "n", phase: str | None = None, gpu: bool = True, **meta):
    refs = [{"kind": owner, "name": "o", "uid": "u", "controller": True}] if owner else []
    limits = {ha.RES_GPUMEM: "1000"} if gpu else {"cpu": "1"}
    annotations = {**({ha.BIND_PHASE: phase} if phase else {}), **meta.pop("annotations", {})}
    return {
        "metadata": {"name": "p", "namespace": "ns", "ownerReferences": refs, "annotations": annotations, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


@pytest.mark.parametrize(
    ("obj", "stays"),
    [
        (pod("DaemonSet"), True),
        (pod(annotations={nh.MIRROR_ANNOTATION: "x"}), True),
        (pod("ReplicaSet"), False),
        (pod("StatefulSet"), False),
        (pod("Job"), False),
        (pod(None), False),  # a bare pod leaves too (kubectl drain --force): it would die with the node
    ],
)
def test_what_stays_on_a_drained_node(obj, stays):
    assert nh.stays(obj) is stays


def test_a_moved_pod_names_its_controller():
    assert nh.moved(pod("ReplicaSet")) == nh.Moved("ns", "p", "ReplicaSet", "o", "u")
    assert nh.moved(pod(None)) == nh.Moved("ns", "p")
    m = nh.Moved("ns", "p", "ReplicaSet", "o", "u")
    assert nh.Moved.from_dict(m.as_dict()) == m


@pytest.mark.parametrize(
    ("obj", "back"),
    [
        (pod("ReplicaSet", phase=ha.PHASE_SUCCESS), True),
        (pod("ReplicaSet", phase=ha.PHASE_ALLOCATING), False),  # bound, allocation not finished
        (pod("ReplicaSet", node=None), False),
        (pod("ReplicaSet", phase=ha.PHASE_FAILED), False),
        (pod("ReplicaSet", gpu=False), True),  # a CPU pod: bound is placed
        (pod("ReplicaSet", gpu=True), False),  # a GPU pod placed without HAMi is not
    ],
)
def test_what_counts_as_placed_again(obj, back):
    assert nh.back(obj) is back


def test_init_container_gpu_counts():
    obj = pod("ReplicaSet", gpu=False)
    obj["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {ha.RES_GPUCORES: "10"}}}]
    assert nh.asks_gpu(obj)


def test_the_drain_acts_on_a_new_image_only_and_the_settle_on_a_new_machine_or_a_handover():
    drain, settled = NodeDrainProvider(), NodeSettledProvider()
    old = {"node": "n", "image": "a", "kubeconfig": "k", "moved": [], "timeout_seconds": 1}
    assert drain.diff("n", old, {**old, "image": "b"}).changes
    assert not drain.diff("n", old, {**old, "moved": None}).changes  # its own output is no input
    assert drain.diff("n", old, {**old, "node": "m"}).replaces == ["node"]
    # same image (a kubeconfig renewed): no drain, what was handed over is kept
    kept = drain.update("n", {**old, "moved": [{"pod": "x"}]}, {**old, "kubeconfig": "k2"}).outs
    assert kept["moved"] == [{"pod": "x"}]
    s_old = {"node": "n", "machine_id": "m1", "moved": [], "kubeconfig": "k", "timeout_seconds": 1}
    assert settled.diff("n", s_old, {**s_old, "machine_id": "m2"}).changes
    assert settled.diff("n", s_old, {**s_old, "moved": [{"pod": "x"}]}).changes
    assert not settled.diff("n", s_old, dict(s_old)).changes
    # a renewed kubeconfig alone updates without touching the cluster (no client is made)
    assert settled.update("n", s_old, {**s_old, "kubeconfig": "not a kubeconfig"}).outs["kubeconfig"]
