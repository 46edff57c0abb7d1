"""A pool's join token, judged by every preview against the clock and the pool's Nodes: renewed
while machines are still to join, revoked once all have, never revoked when the tenant cannot be
asked; the provider's diff and update follow the verdict with a fake API client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from components.lifecycle.bootstrap_token import (
    HOSTNAME_LABEL,
    KEEP,
    RENEW,
    REVOKE,
    delete_token,
    join_token_verdict,
    worker_joins,
)
from components.providers import bootstrap_token as provider
from components.tenant.external_pool import join_output
from tests.support.fake_kube import FakeCore

NOW = 1_800_000_000.0
TTL = 7200


def at(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(NOW + seconds_from_now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("expiration", "revoked", "joined", "expected", "verdict"),
    [
        (at(TTL), False, 0, 3, KEEP),  # fresh, nobody joined yet
        (at(TTL * 0.3), False, 2, 3, KEEP),  # more than a quarter left
        (at(TTL * 0.2), False, 2, 3, RENEW),  # last quarter of its life, one machine to go
        (at(-60), False, 0, 3, RENEW),  # expired (the tokencleaner took it) before the joins
        (at(TTL), False, 3, 3, REVOKE),  # every expected machine joined
        (at(TTL), False, 4, 3, REVOKE),  # more Nodes than expected: still nothing left to join
        (at(-60), False, 3, 3, REVOKE),  # expired after the joins: closed, not renewed
        (at(TTL), True, 3, 3, KEEP),  # already revoked and all joined
        (at(TTL), True, 3, 4, RENEW),  # `nodes` raised after the revocation
        (at(TTL), True, 1, 3, RENEW),  # a machine was removed (its Node deleted)
        ("", False, 0, 1, RENEW),  # no expiry known
        (at(TTL), False, None, 3, KEEP),  # the tenant cannot be asked: time alone decides
        (at(TTL * 0.1), False, None, 3, RENEW),
        (at(TTL), False, None, 0, KEEP),  # never revoked on an unknown count
    ],
)
def test_verdict(expiration, revoked, joined, expected, verdict):
    assert join_token_verdict(expiration, TTL, revoked, joined, expected, NOW) == verdict


LABELS = {"gpu": "on", "gpu-tenancy/pool": "a100", "gpu-tenancy/tenant": "team-a"}


@pytest.fixture
def fake(monkeypatch):
    core = FakeCore()
    monkeypatch.setattr(provider, "core_api", lambda _kubeconfig: core)
    return core


def join_machine(core: FakeCore, name: str, labels: dict[str, str] = LABELS) -> None:
    core.add_node(name, labels=labels)


def props(expected: int = 2, ttl: int = TTL) -> dict:
    return {
        "kubeconfig": "apiVersion: v1",
        "token_id": "abc123",
        "ttl_seconds": ttl,
        "description": "pool a100",
        "joins": {"labels": LABELS, "expected": expected},
    }


def test_the_provider_renews_until_all_joined_then_revokes(fake):
    p = provider.BootstrapTokenProvider()
    made = p.create(props()).outs
    assert made["revoked"] is False and ("kube-system", "bootstrap-token-abc123") in fake.secrets
    assert not p.diff("abc123", made, props()).changes  # a second up changes nothing

    join_machine(fake, "other-0", {**LABELS, "gpu-tenancy/pool": "l4"})  # another pool's: not counted
    join_machine(fake, "a100-0")  # one of two joined
    assert not p.diff("abc123", made, props()).changes
    old = {**made, "expiration": at_now(TTL * 0.1)}  # nearly expired with one still to join
    renew = p.diff("abc123", old, props())
    assert renew.replaces == ["expiration"] and renew.delete_before_replace

    join_machine(fake, "a100-1")  # both joined: the next up revokes
    revoke = p.diff("abc123", made, props())
    assert revoke.changes and not revoke.replaces
    closed = p.update("abc123", made, props()).outs
    assert closed["revoked"] is True and closed["token"] == "" and not fake.secrets
    assert not p.diff("abc123", closed, props()).changes
    p.delete("abc123", closed)  # nothing left to delete, and no error

    # one more machine planned, or one gone: a fresh token
    assert p.diff("abc123", closed, props(expected=3)).replaces == ["expiration"]
    fake.remove_node("a100-1")
    assert p.diff("abc123", closed, props()).replaces == ["expiration"]
    # the pool is found by its own labels
    assert {n for verb, n in fake.calls if verb == "list_node"} == {
        "gpu=on,gpu-tenancy/pool=a100,gpu-tenancy/tenant=team-a"
    }


def test_an_unreachable_tenant_never_revokes(monkeypatch):
    def refuse(_kubeconfig):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(provider, "core_api", refuse)
    made = {**props(expected=0), "token": "abc123.x", "expiration": at_now(TTL), "revoked": False}
    assert not provider.BootstrapTokenProvider().diff("abc123", made, props(expected=0)).changes


WORKER = "lab-team-a-worker-0"


def test_a_docker_workers_token_heals_a_failed_join_and_is_left_alone_once_joined(fake, monkeypatch):
    p = provider.BootstrapTokenProvider()
    worker = {**props(), "joins": worker_joins(WORKER)}
    made = p.create(worker).outs
    assert not p.diff("abc123", made, worker).changes  # fresh: its join is under way
    lapsed = {**made, "expiration": at_now(-60)}  # the join failed, and the token lapsed since
    assert p.diff("abc123", lapsed, worker).replaces == ["expiration"]
    fake.add_node("lab-team-a-worker-1", labels={HOSTNAME_LABEL: "lab-team-a-worker-1"})  # another worker
    assert p.diff("abc123", lapsed, worker).replaces == ["expiration"]

    fake.add_node(WORKER, labels={HOSTNAME_LABEL: WORKER})  # joined ...
    assert delete_token(fake, "abc123", made["token"])  # ... and its membership revoked the token
    assert not p.diff("abc123", made, worker).changes  # a second up changes nothing
    assert not p.diff("abc123", lapsed, worker).changes  # and a joined worker never joins again

    def refuse(_kubeconfig):
        raise ConnectionError("no route to host")

    fake.remove_node(WORKER)
    monkeypatch.setattr(provider, "core_api", refuse)  # the tenant cannot be asked: kept, not renewed blind
    assert not p.diff("abc123", lapsed, worker).changes


def test_a_pool_token_already_gone_after_the_joins_is_left_as_it_is(fake):
    p = provider.BootstrapTokenProvider()
    made = p.create(props(expected=1)).outs
    join_machine(fake, "a100-0")
    assert p.diff("abc123", made, props(expected=1)).changes  # still held: the next up revokes it
    fake.secrets.clear()  # expired and cleaned up by the tokencleaner
    assert not p.diff("abc123", made, props(expected=1)).changes


def test_the_join_output_says_what_to_do():
    open_ = join_output("10.0.0.1:31443", "abc123.s3cr3t", "sha256:00", "2027-01-01T00:00:00Z", False, LABELS, 4)
    assert set(open_) == {"configuration", "labels", "expires", "status"}
    assert "abc123.s3cr3t" in open_["configuration"] and "for 4 machines" in open_["status"]
    closed = join_output("10.0.0.1:31443", "", "sha256:00", "2027-01-01T00:00:00Z", True, LABELS, 4)
    assert set(closed) == {"labels", "status"} and "all 4 machines joined" in closed["status"]
    assert "raise the pool's nodes" in closed["status"]


def at_now(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")
