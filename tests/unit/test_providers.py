"""The dynamic providers' shared base: what replaces, what updates, what an update keeps, and
each provider's own rule on top of it (a bound token in its renewal window is replaced)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from components.providers.bound_token import BoundTokenProvider
from components.providers.node_gpu_capacity import NodeGpuCapacityProvider
from components.providers.node_membership import NodeMembershipProvider
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
