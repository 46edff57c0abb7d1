"""The lock-release logic against a real kube-apiserver: HAMi's own lock and bind-phase keys,
real optimistic-concurrency conflicts. HAMi's scheduler is not in this loop (see the module
docstring of test_hami_scheduler for why); pods are bound the way HAMi's Bind leaves them."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest
from kubernetes import client

from components.controllers.release import daemon
from components.controllers.release import lock as lr
from components.domain import hami_annotations as ha
from components.lifecycle import release_wait as ww
from tests.support.cluster import add_node
from tests.support.hami_stand_in import SCHEDULER_SAYS, mark_unschedulable

pytestmark = pytest.mark.integration


def bound_pod(core, node: str, phase: str = ha.PHASE_ALLOCATING) -> str:
    """A pod as HAMi's Bind leaves it: bind-phase, bind-time, vgpu-node and spec.nodeName."""
    name = f"gpu-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=name,
                annotations={ha.BIND_PHASE: phase, ha.BIND_TIME: "1764683400", ha.VGPU_NODE: node},
            ),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")]),
        ),
    )
    return name


def lock(core, node: str, value: str) -> None:
    core.patch_node(node, {"metadata": {"annotations": {ha.NODE_LOCK: value}}})


def lock_for(pod: str, namespace: str = "default") -> str:
    return ha.encode_node_lock(ha.NodeLock(datetime.now(UTC), namespace, pod))


def node_lock(core, node: str) -> str | None:
    return (core.read_node(node).metadata.annotations or {}).get(ha.NODE_LOCK)


def phase(core, pod: str) -> str | None:
    return core.read_namespaced_pod(pod, "default").metadata.annotations.get(ha.BIND_PHASE)


def test_lock_held_by_this_pod_is_released(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    lock(core, node, lock_for(pod))
    outcome = lr.release_pod(core, "default", pod)
    assert outcome == lr.Outcome(lr.RELEASED, node)
    assert node_lock(core, node) is None
    assert phase(core, pod) == ha.PHASE_SUCCESS
    # idempotent: a second pass changes nothing and says so
    assert lr.release_pod(core, "default", pod).status == lr.SUCCEEDED


def test_lock_held_by_another_pod_is_untouched(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    other = lock_for("someone-else")
    lock(core, node, other)
    assert lr.release_pod(core, "default", pod).status == lr.SUCCEEDED
    assert node_lock(core, node) == other
    assert phase(core, pod) == ha.PHASE_SUCCESS


def test_same_pod_name_in_another_namespace_is_not_ours(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    theirs = lock_for(pod, namespace="team-x")
    lock(core, node, theirs)
    lr.release_pod(core, "default", pod)
    assert node_lock(core, node) == theirs


def test_no_lock(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    assert lr.release_pod(core, "default", pod) == lr.Outcome(lr.SUCCEEDED, node)
    assert phase(core, pod) == ha.PHASE_SUCCESS


def test_pod_deleted_meanwhile(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    lock(core, node, lock_for(pod))
    core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)
    assert lr.release_pod(core, "default", pod).status == lr.POD_GONE
    # the lock of a vanished pod is HAMi's to expire (its LockNode drops locks of missing pods)
    assert node_lock(core, node) is not None


def test_node_deleted_meanwhile(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    core.delete_node(node)
    assert lr.release_pod(core, "default", pod).status == lr.NODE_GONE


def test_concurrent_update_is_retried(cluster, node):
    """Someone writes the node between our read and our write: the API server answers 409 and
    the release looks again instead of overwriting."""
    core = cluster.core()
    pod = bound_pod(core, node)
    lock(core, node, lock_for(pod))
    calls = {"patch": 0}

    class Racing:
        def __getattr__(self, name):
            return getattr(core, name)

        def patch_node(self, name, body, **kwargs):
            calls["patch"] += 1
            if calls["patch"] == 1:
                core.patch_node(name, {"metadata": {"labels": {"raced": "yes"}}})
            return core.patch_node(name, body, **kwargs)

    assert lr.release_pod(Racing(), "default", pod).status == lr.RELEASED
    assert calls["patch"] == 2
    assert node_lock(core, node) is None
    assert core.read_node(node).metadata.labels["raced"] == "yes"


def test_a_lock_taken_by_another_pod_during_the_race_survives(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node)
    lock(core, node, lock_for(pod))
    theirs = lock_for("next-pod")

    class Racing:
        def __getattr__(self, name):
            return getattr(core, name)

        def patch_node(self, name, body, **kwargs):
            lock(core, name, theirs)  # expired and re-taken by HAMi for another pod
            return core.patch_node(name, body, **kwargs)

    assert lr.release_pod(Racing(), "default", pod).status == lr.SUCCEEDED
    assert node_lock(core, node) == theirs


def test_malformed_lock_is_left_alone_with_a_warning(cluster, node, caplog):
    core = cluster.core()
    pod = bound_pod(core, node)
    lock(core, node, "not-a-lock")
    with caplog.at_level(logging.WARNING, logger="gpu-tenancy.lock-release"):
        outcome = lr.release_pod(core, "default", pod)
    assert outcome.status == lr.SUCCEEDED and "malformed" in outcome.detail
    assert node_lock(core, node) == "not-a-lock"
    assert "leaving malformed" in caplog.text


def test_unbound_pod_times_out_with_the_scheduler_reason(cluster):
    core = cluster.core()
    name = f"pending-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        ),
    )
    mark_unschedulable(
        core,
        "default",
        name,
        SCHEDULER_SAYS.format("CardInsufficientCore"),
    )
    (result,) = ww.wait_for_pods(core, "default", timeout=1.0, names=[name], interval=0.2)
    assert result.name == name and result.outcome.status == ww.NOT_BOUND
    assert "CardInsufficientCore" in result.outcome.detail


def test_the_wait_only_reads_and_says_who_did_not_finish(cluster, node):
    """ReleaseWait's wait writes nothing (the controller is the one writer): a bound pod left
    allocating is reported as such; one placed without HAMi is reported as escaping it."""
    core = cluster.core()
    stuck = bound_pod(core, node)
    held = lock_for(stuck)
    lock(core, node, held)
    before = core.read_namespaced_pod(stuck, "default").metadata.resource_version
    (result,) = ww.wait_for_pods(core, "default", timeout=1.0, names=[stuck], interval=0.2)
    assert result.outcome.status == ww.ALLOCATING and "release controller" in result.outcome.detail
    assert core.read_namespaced_pod(stuck, "default").metadata.resource_version == before
    assert node_lock(core, node) == held
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=plain),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")]),
        ),
    )
    (result,) = ww.wait_for_pods(core, "default", timeout=0.5, names=[plain], interval=0.2)
    assert result.outcome.status == ww.NO_HAMI and "without HAMi" in result.outcome.detail
    done = bound_pod(core, node, phase=ha.PHASE_SUCCESS)
    (result,) = ww.wait_for_pods(core, "default", timeout=5, names=[done], interval=0.2)
    assert result.outcome == ww.Outcome(ww.BOUND, node)


def test_release_command_one_pass_touches_only_allocating_pods(cluster, node, tmp_path):
    core = cluster.core()
    mine = bound_pod(core, node)
    done = bound_pod(core, node, phase=ha.PHASE_SUCCESS)
    lock(core, node, lock_for(mine))
    before = core.read_namespaced_pod(done, "default").metadata.resource_version
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig_text)
    assert daemon.main(["--kubeconfig", str(kubeconfig), "--namespace", "default", "--once"]) == 0
    assert node_lock(core, node) is None
    assert phase(core, mine) == ha.PHASE_SUCCESS
    assert core.read_namespaced_pod(done, "default").metadata.resource_version == before


def test_pod_on_a_node_without_the_mock_label_is_not_ours(cluster):
    core = cluster.core()
    real = f"real-gpu-{uuid.uuid4().hex[:6]}"
    add_node(cluster, real, mock_gpu=False)
    pod = bound_pod(core, real)
    lock(core, real, lock_for(pod))
    try:
        assert lr.release_pod(core, "default", pod).status == lr.NOT_MOCK
        assert phase(core, pod) == ha.PHASE_ALLOCATING and node_lock(core, real) is not None
        assert lr.release_pod(core, "default", pod, node_label=None).status == lr.RELEASED
    finally:
        core.delete_node(real)


def test_allocation_marked_failed_is_reported(cluster, node):
    core = cluster.core()
    pod = bound_pod(core, node, phase=ha.PHASE_FAILED)
    outcome = lr.release_pod(core, "default", pod)
    assert outcome.status == lr.FAILED and "failed" in outcome.detail
