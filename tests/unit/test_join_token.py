"""A pool's join token, judged by every preview against the clock and the pool's Nodes: renewed
while machines are still to join, revoked once all have, never revoked when the tenant cannot be
asked; the provider's diff and update follow the verdict with a fake API client."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from components.ops import bootstrap
from components.ops.bootstrap import KEEP, RENEW, REVOKE, join_token_verdict
from components.providers import bootstrap_token as provider
from components.tenant.external_pool import join_output

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


class FakeCore:
    """Nodes by label, and the bootstrap-token Secrets the provider creates and deletes."""

    def __init__(self, nodes: list[dict[str, str]]):
        self.nodes = nodes
        self.secrets: dict[str, dict] = {}
        self.selectors: list[str] = []

    def list_node(self, label_selector: str, _preload_content: bool = True):
        self.selectors.append(label_selector)
        want = dict(kv.split("=", 1) for kv in label_selector.split(","))
        items = [{"metadata": {"labels": n}} for n in self.nodes if want.items() <= n.items()]
        return SimpleNamespace(data=json.dumps({"items": items}).encode())

    def create_namespaced_secret(self, namespace, body, _preload_content=True):
        self.secrets[body["metadata"]["name"]] = body

    def read_namespaced_secret(self, name, namespace, _preload_content=True):
        import base64

        body = self.secrets[name]
        data = {k: base64.b64encode(v.encode()).decode() for k, v in body["stringData"].items()}
        meta = {"name": name, "uid": "u", "resourceVersion": "1"}
        return SimpleNamespace(data=json.dumps({"metadata": meta, "data": data}).encode())

    def delete_namespaced_secret(self, name, namespace, body=None, _preload_content=True):
        del self.secrets[name]


LABELS = {"gpu": "on", "gpu-tenancy/pool": "a100", "gpu-tenancy/tenant": "team-a"}


@pytest.fixture
def fake(monkeypatch):
    core = FakeCore([])
    monkeypatch.setattr(provider, "core_api", lambda _kubeconfig: core)
    monkeypatch.setattr(bootstrap, "get_json_or_none", lambda call, *a: json.loads(call(*a).data))
    return core


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
    assert made["revoked"] is False and "bootstrap-token-abc123" in fake.secrets
    assert not p.diff("abc123", made, props()).changes  # a second up changes nothing

    fake.nodes = [{**LABELS, "m": "1"}]  # one of two joined
    assert not p.diff("abc123", made, props()).changes
    old = {**made, "expiration": at_now(TTL * 0.1)}  # nearly expired with one still to join
    renew = p.diff("abc123", old, props())
    assert renew.replaces == ["expiration"] and renew.delete_before_replace

    fake.nodes.append({**LABELS, "m": "2"})  # both joined: the next up revokes
    revoke = p.diff("abc123", made, props())
    assert revoke.changes and not revoke.replaces
    closed = p.update("abc123", made, props()).outs
    assert closed["revoked"] is True and closed["token"] == "" and not fake.secrets
    assert not p.diff("abc123", closed, props()).changes
    p.delete("abc123", closed)  # nothing left to delete, and no error

    # one more machine planned: a fresh token
    assert p.diff("abc123", closed, props(expected=3)).replaces == ["expiration"]
    # another pool's Nodes never count: the selector is the pool's own labels
    assert set(fake.selectors) == {"gpu=on,gpu-tenancy/pool=a100,gpu-tenancy/tenant=team-a"}


def test_an_unreachable_tenant_never_revokes(monkeypatch):
    def refuse(_kubeconfig):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(provider, "core_api", refuse)
    made = {**props(expected=0), "token": "abc123.x", "expiration": at_now(TTL), "revoked": False}
    assert not provider.BootstrapTokenProvider().diff("abc123", made, props(expected=0)).changes


def test_docker_worker_tokens_are_not_judged(fake):
    worker = {**props(), "joins": None}
    made = provider.BootstrapTokenProvider().create(worker).outs
    stale = {**made, "expiration": at_now(-3600)}
    assert not provider.BootstrapTokenProvider().diff("abc123", stale, worker).changes
    assert fake.selectors == []


def test_the_join_output_says_what_to_do():
    open_ = join_output("10.0.0.1:31443", "abc123.s3cr3t", "sha256:00", "2027-01-01T00:00:00Z", False, LABELS, 4)
    assert set(open_) == {"configuration", "labels", "expires", "status"}
    assert "abc123.s3cr3t" in open_["configuration"] and "for 4 machines" in open_["status"]
    closed = join_output("10.0.0.1:31443", "", "sha256:00", "2027-01-01T00:00:00Z", True, LABELS, 4)
    assert set(closed) == {"labels", "status"} and "all 4 machines joined" in closed["status"]
    assert "raise the pool's nodes" in closed["status"]


def at_now(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")
