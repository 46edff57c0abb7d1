"""The dynamic providers' shared base: what replaces, what updates, what an update keeps, and
each provider's own rule on top of it (a bound token in its renewal window is replaced), and
reads that report drift instead of raising."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiException

from components.providers import hami_registration as reg_provider
from components.providers import webhook_probe as wp_provider
from components.providers.bound_token import BoundTokenProvider
from components.providers.node_gpu_capacity import NodeGpuCapacityProvider
from components.providers.node_membership import NodeMembershipProvider
from components.providers.release_wait import ReleaseWaitProvider
from components.providers.webhook_probe import HamiWebhookProbeProvider


def test_replace_update_or_nothing():
    p = NodeMembershipProvider()
    olds = {"kubeconfig": "k", "node": "n", "machine_id": "m", "token_id": "t", "timeout_seconds": 300, "uid": "u"}
    assert not p.diff("id", olds, {**olds}).changes
    moved = p.diff("id", olds, {**olds, "machine_id": "m2"})
    assert moved.changes and moved.replaces == ["machine_id"] and moved.delete_before_replace
    relabelled = p.diff("id", olds, {**olds, "token_id": "t2"})
    assert relabelled.changes and relabelled.replaces == []
    # an input neither replacing nor updating is no change (the wait's own timeout)
    assert not p.diff("id", olds, {**olds, "timeout_seconds": 30}).changes
    # an update keeps what the create computed
    assert p.update("id", olds, {**olds, "token_id": "t2"}).outs["uid"] == "u"


def test_each_states_its_own_keys():
    assert NodeGpuCapacityProvider().diff("n", {"node": "a", "count": 1}, {"node": "b", "count": 1}).replaces == [
        "node"
    ]
    probe = HamiWebhookProbeProvider()
    assert probe.diff("x", {"hami_revision": 1}, {"hami_revision": 2}).replaces == []
    assert probe.diff("x", {"hami_revision": 1}, {"hami_revision": 2}).changes
    # a Deployment's new generation (any spec change) is a rollout to wait for, not a new wait
    wait, olds = ReleaseWaitProvider(), {"namespace": "ml", "workload": "w", "workload_uid": "u", "generation": 1}
    rolled = wait.diff("ml/w", olds, {**olds, "generation": 2})
    assert rolled.changes and rolled.replaces == []
    assert wait.diff("ml/w", olds, {**olds, "workload_uid": "u2"}).replaces == ["workload_uid"]


def stamp(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_bound_token_is_replaced_in_its_renewal_window():
    p = BoundTokenProvider()
    olds = {"issuer": "k", "namespace": "kube-system", "account": "a", "account_uid": "u", "seconds": 3600}
    fresh = {**olds, "renew_before_seconds": 600, "expires": stamp(3000)}
    assert not p.diff("id", fresh, {**olds, "renew_before_seconds": 600}).changes
    due = p.diff("id", {**fresh, "expires": stamp(300)}, {**olds, "renew_before_seconds": 600})
    assert due.replaces == ["expires"] and not due.delete_before_replace  # the new one first
    assert p.diff("id", fresh, {**olds, "account_uid": "u2", "renew_before_seconds": 600}).replaces == ["account_uid"]


# -- refresh: a read reports what it finds; a finding that breaks the promise is drift --------
def dry_run_answers(scheduler: str):
    """A tenant whose dry-run GPU pod comes back with `scheduler`."""
    answer = SimpleNamespace(data=json.dumps({"spec": {"schedulerName": scheduler}}).encode())
    return SimpleNamespace(create_namespaced_pod=lambda *_a, **_k: answer, get_api_resources=ANSWERS)


def ANSWERS(**_k):  # noqa: N802 - stands for the client's method
    """The tenant answers an authenticated request (base.answering): it can be asked."""
    return SimpleNamespace(data=b'{"kind": "APIResourceList"}')


PROBE = {"kubeconfig": "k", "namespace": "default", "timeout_seconds": 0.1, "hami_revision": 1}


@pytest.mark.parametrize(("scheduler", "drift"), [("default-scheduler", True), ("hami-scheduler", False)])
def test_a_webhook_refresh_reports_what_it_saw_and_an_update_follows_drift(monkeypatch, scheduler, drift):
    monkeypatch.setattr(wp_provider, "core_api", lambda _k: dry_run_answers(scheduler))
    p = wp_provider.HamiWebhookProbeProvider()
    read = p.read("default/probe", {**PROBE, "scheduler_name": "hami-scheduler"})  # never raises
    assert read.id == "default/probe" and read.outs["scheduler_name"] == scheduler
    diff = p.diff("default/probe", read.outs, PROBE)
    assert diff.changes is drift and diff.replaces == []


def test_an_api_error_at_refresh_is_a_finding_too(monkeypatch):
    def refused(*_a, **_k):
        raise ApiException(status=503, reason="Service Unavailable")

    tenant = SimpleNamespace(create_namespaced_pod=refused, get_api_resources=ANSWERS)
    monkeypatch.setattr(wp_provider, "core_api", lambda _k: tenant)
    p = wp_provider.HamiWebhookProbeProvider()
    read = p.read("default/probe", {**PROBE, "scheduler_name": "hami-scheduler"})
    assert read.outs["scheduler_name"] == "error: Service Unavailable"
    assert p.diff("default/probe", read.outs, PROBE).changes


@pytest.mark.parametrize(("absent", "drift"), [({"gpu-0": ["GPU-1"]}, True), ({}, False)])
def test_a_card_missing_at_refresh_is_drift_the_next_update_waits_for(monkeypatch, absent, drift):
    expected = {"gpu-0": ["GPU-0", "GPU-1"], "gpu-1": ["GPU-2"]}
    monkeypatch.setattr(reg_provider, "core_api", lambda _k: SimpleNamespace(get_api_resources=ANSWERS))
    monkeypatch.setattr(reg_provider, "check", lambda _core, _expected: (absent, "why"))
    p = reg_provider.HamiRegistrationProvider()
    props = {"kubeconfig": "k", "expected": expected, "hami_revision": 1, "timeout_seconds": 120}
    read = p.read("hami-registration", {**props, "registered": {"gpu-0": 2, "gpu-1": 1}})
    assert read.outs["registered"] == {"gpu-0": 2 - len(absent.get("gpu-0", [])), "gpu-1": 1}
    assert p.diff("hami-registration", read.outs, props).changes is drift
