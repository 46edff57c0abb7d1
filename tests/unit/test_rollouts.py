"""Rollouts: how many pods a workload holds at once by Kubernetes' rules, and the wait that
follows a Deployment's rollout (generation, pod template, leaving pods) on a fake API client."""

from __future__ import annotations

import threading

import pytest

from components.domain import hami_annotations as ha
from components.domain.rollouts import RolloutError, scaled, surge
from components.lifecycle import release_wait as ww
from tests.support.fake_kube import FakeApps, FakeCore

NS, DEPLOY = "ml", "infer"
LABELS = {"app": "infer"}
SELECTOR = "app=infer"


@pytest.mark.parametrize(
    ("kind", "strategy", "replicas", "want"),
    [
        ("Deployment", None, 3, 1),  # 25 % of 3 = 0.75, rounded up
        ("Deployment", None, 4, 1),
        ("Deployment", None, 5, 2),  # 1.25 -> 2
        ("Deployment", None, 0, 0),
        ("Deployment", {"type": "Recreate"}, 8, 0),
        ("Deployment", {"type": "RollingUpdate"}, 8, 2),
        ("Deployment", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, 3, 0),
        ("Deployment", {"rollingUpdate": {"maxSurge": "100%"}}, 3, 3),
        ("Deployment", {"rollingUpdate": {"maxSurge": "34%"}}, 3, 2),  # 1.02 -> 2
        ("Deployment", {"rollingUpdate": {"maxSurge": 2}}, 1, 2),
        ("Deployment", {"rollingUpdate": {"maxSurge": 2.0}}, 1, 2),  # as the policy engine passes numbers
        ("DaemonSet", None, 10, 0),
        ("DaemonSet", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}, 3, 2),
        ("DaemonSet", {"type": "OnDelete", "rollingUpdate": {"maxSurge": 5}}, 3, 0),
        ("StatefulSet", {"type": "RollingUpdate"}, 4, 0),
        ("ReplicaSet", None, 4, 0),
        ("Pod", None, 1, 0),
    ],
)
def test_surge_follows_the_controllers_rules(kind, strategy, replicas, want):
    assert surge(kind, strategy, replicas) == want


@pytest.mark.parametrize("value", [-1, "-5%", "25", True, "x%", "1.5%", 1.5, None, [1]])
def test_a_surge_the_api_would_refuse_is_an_error_or_a_plain_number(value):
    if value == "25":
        assert scaled(value, 4, round_up=True) == 25
        return
    with pytest.raises(RolloutError):
        scaled(value, 4, round_up=True)


def test_percentages_round_as_intstr_does():
    assert scaled("25%", 3, round_up=True) == 1
    assert scaled("25%", 3, round_up=False) == 0
    assert scaled("0%", 100, round_up=True) == 0


# -- following a Deployment's rollout ---------------------------------------------------


def _pod(core: FakeCore, name: str, template: str, node: str | None, phase: str | None, deleting: bool = False):
    core.add_pod(NS, name, annotations={ha.BIND_PHASE: phase} if phase else {}, node=node)
    meta = core.pods[(NS, name)]["metadata"]
    meta["labels"] = {**LABELS, "pod-template-hash": template}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"


def _wait(core, apps, generation=2, count=2, timeout=0.6):
    return ww.wait_for_pods(
        core,
        NS,
        timeout=timeout,
        selector=SELECTOR,
        count=count,
        interval=0.05,
        rollout=ww.Rollout(DEPLOY, generation),
        apps=apps,
    )


def _rolled(apps: FakeApps, observed: int = 2, failure: str | None = None) -> None:
    apps.put_deployment(NS, DEPLOY, generation=2, observed=observed, revision="2", labels=LABELS)
    apps.put_replica_set(NS, DEPLOY, "1", "old", LABELS)
    apps.put_replica_set(NS, DEPLOY, "2", "new", LABELS, failure=failure)


def test_the_wait_ends_when_the_new_pods_are_bound_and_the_old_ones_gone():
    core, apps = FakeCore(), FakeApps()
    _rolled(apps)
    _pod(core, "new-1", "new", "n1", ha.PHASE_SUCCESS)
    _pod(core, "new-2", "new", "n1", ha.PHASE_SUCCESS)
    results = _wait(core, apps)
    assert {r.name: r.outcome.status for r in results} == {"new-1": ww.BOUND, "new-2": ww.BOUND}


def test_bound_old_pods_do_not_count_for_the_new_template():
    """The previous template's pods are bound and released; they must not end the wait."""
    core, apps = FakeCore(), FakeApps()
    _rolled(apps)
    _pod(core, "old-1", "old", "n1", ha.PHASE_SUCCESS)
    _pod(core, "old-2", "old", "n1", ha.PHASE_SUCCESS)
    _pod(core, "new-1", "new", "n1", ha.PHASE_SUCCESS)
    results = {r.name: r.outcome for r in _wait(core, apps)}
    assert results["new-1"].status == ww.BOUND
    assert results[""].status == ww.NOT_BOUND and "1 of 2 new pods exist" in results[""].detail
    assert results["old-1"].status == results["old-2"].status == ww.LEAVING
    assert "previous pod template" in results["old-1"].detail


def test_a_pod_being_deleted_keeps_the_rollout_open_until_it_is_gone():
    core, apps = FakeCore(), FakeApps()
    _rolled(apps)
    _pod(core, "new-1", "new", "n1", ha.PHASE_SUCCESS)
    _pod(core, "new-2", "new", "n1", ha.PHASE_SUCCESS)
    _pod(core, "old-1", "old", "n1", ha.PHASE_SUCCESS, deleting=True)
    threading.Timer(0.2, lambda: core.pods.pop((NS, "old-1"))).start()
    results = _wait(core, apps, timeout=3)
    assert [r.outcome.status for r in results] == [ww.BOUND, ww.BOUND]

    _pod(core, "old-2", "old", "n1", ha.PHASE_SUCCESS, deleting=True)
    results = {r.name: r.outcome for r in _wait(core, apps)}
    assert results["old-2"].status == ww.LEAVING and "being deleted" in results["old-2"].detail


def test_a_generation_the_controller_has_not_seen_is_not_a_finished_rollout():
    """Right after apply the Deployment controller may not have acted yet: the old ReplicaSet's
    pods are all there is, and they must not pass for the new rollout."""
    core, apps = FakeCore(), FakeApps()
    _rolled(apps, observed=1)
    _pod(core, "old-1", "old", "n1", ha.PHASE_SUCCESS)
    _pod(core, "old-2", "old", "n1", ha.PHASE_SUCCESS)
    results = {r.name: r.outcome for r in _wait(core, apps)}
    assert "has not seen generation 2" in results[""].detail
    assert results["old-1"].status == ww.LEAVING


def test_the_stack_generation_counts_even_when_the_read_lags():
    """The Deployment read back still says generation 1: the stack applied 2, so 2 it is."""
    core, apps = FakeCore(), FakeApps()
    apps.put_deployment(NS, DEPLOY, generation=1, observed=1, revision="1", labels=LABELS)
    apps.put_replica_set(NS, DEPLOY, "1", "old", LABELS)
    _pod(core, "old-1", "old", "n1", ha.PHASE_SUCCESS)
    results = {r.name: r.outcome for r in _wait(core, apps, count=1)}
    assert "has not seen generation 2" in results[""].detail


def test_new_pods_the_quota_refused_are_reported_with_the_replica_sets_reason():
    core, apps = FakeCore(), FakeApps()
    refusal = 'pods "infer-new-x" is forbidden: exceeded quota: gpu-budget, requested: nvidia.com/gpucores=30'
    _rolled(apps, failure=refusal)
    _pod(core, "old-1", "old", "n1", ha.PHASE_SUCCESS)
    _pod(core, "old-2", "old", "n1", ha.PHASE_SUCCESS)
    results = {r.name: r.outcome for r in _wait(core, apps)}
    assert results[""].detail == f"0 of 2 new pods exist: {refusal}"


def test_an_unbound_new_pod_carries_hamis_reason():
    core, apps = FakeCore(), FakeApps()
    _rolled(apps)
    _pod(core, "new-1", "new", "n1", ha.PHASE_SUCCESS)
    _pod(core, "new-2", "new", None, None)
    core.pods[(NS, "new-2")]["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "message": "0/1 nodes are available: 1 CardInsufficientCore."}
    ]
    results = {r.name: r.outcome for r in _wait(core, apps)}
    assert results["new-2"].status == ww.NOT_BOUND and "CardInsufficientCore" in results["new-2"].detail


def test_a_missing_deployment_says_so():
    core, apps = FakeCore(), FakeApps()
    results = _wait(core, apps)
    assert "does not exist" in results[0].outcome.detail
