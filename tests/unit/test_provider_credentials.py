"""Every dynamic provider, against tenants that answer no more: a credential is connection data
(a rotated one alone is stored, no gate runs again, and later operations use it), a refresh of an
unreachable tenant or of a refused credential keeps the state instead of failing `up --refresh`,
and a destroy passes a refused credential wherever the resource holds nothing in the tenant."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

import components.providers
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.providers import base
from components.providers import simulated_nodes as sn
from tests.support.cluster import free_port
from tests.support.fake_kube import Answer

FAR = "2099-01-01T00:00:00Z"


def providers() -> list[type[base.Provider]]:
    """Every Provider class in components.providers, so a new one is held to the same rules."""
    found: dict[str, type[base.Provider]] = {}
    for info in pkgutil.iter_modules(components.providers.__path__):
        module = importlib.import_module(f"components.providers.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, base.Provider) and cls is not base.Provider:
                found[cls.__name__] = cls
    return [found[k] for k in sorted(found)]


def state(cls: type[base.Provider], kubeconfig: str) -> dict[str, Any]:
    """A stored state (inputs and outputs) of one resource of `cls`, reaching the tenant with
    `kubeconfig`."""
    samples: dict[str, dict[str, Any]] = {
        "BootstrapTokenProvider": {
            "token_id": "abc123",
            "ttl_seconds": 3600,
            "description": "pool a100",
            "joins": None,
            "token": "abc123.0123456789abcdef",
            "expiration": FAR,
            "revoked": False,
        },
        "BoundTokenProvider": {
            "namespace": "kube-system",
            "account": "kwok",
            "account_uid": "u",
            "seconds": 86400,
            "renew_before_seconds": 600,
            "token": "t",
            "expires": FAR,
        },
        "ControlPlaneSettledProvider": {
            "tenant": "team-a",
            "control_plane": "tenant-team-a/team-a",
            "version": "v1.35.1",
            "settle_seconds": 1,
            "timeout_seconds": 1,
            "waited_seconds": 1.0,
        },
        "DataStoreTeardownProvider": {"name": "default", "timeout_seconds": 1},
        "HamiRegistrationProvider": {
            "expected": {"n-0": ["GPU-0"]},
            "hami_revision": 1,
            "timeout_seconds": 1,
            "registered": {"n-0": 1},
        },
        "HamiWebhookProbeProvider": {
            "namespace": "default",
            "timeout_seconds": 1,
            "hami_revision": 1,
            "scheduler_name": "hami-scheduler",
        },
        "MachinesJoinedProvider": {"tenant": "team-b", "pools": {"gpus": 2}, "timeout_seconds": 1, "ready": ["m-0"]},
        "NodeDrainProvider": {"node": "n-0", "image": "node:v1", "timeout_seconds": 1, "moved": []},
        "NodeGpuCapacityProvider": {"node": "n-0", "count": 4, "machine_id": "m"},
        "NodeMembershipProvider": {"node": "n-0", "machine_id": "m", "token_id": "", "timeout_seconds": 1, "uid": "u"},
        "NodeSettledProvider": {"node": "n-0", "machine_id": "m", "moved": [], "timeout_seconds": 1},
        "ReleaseWaitProvider": {
            "namespace": "ml",
            "workload": "trainer",
            "workload_uid": "u",
            "pod_names": ["trainer"],
            "selector": "",
            "count": 0,
            "generation": 0,
            "timeout_seconds": 1,
            "fail_on_pending": True,
            "pods": [{"name": "trainer", "node": "n-0", "status": "bound", "reason": ""}],
            "pending": 0,
        },
        "SimulatedNodesProvider": {
            "tenant": "team-a",
            "pool": "sim",
            "names": ["sim-0"],
            "model": "A100-80GB",
            "cards_per_node": 1,
            "mock_label": sn.mock_label(),
        },
        "TenantVersionProvider": {"tenant": "team-a", "version": "v1.35.1", "key": "tenants[0].version"},
        "WebhookCertificateProvider": {
            "dns_names": ["hami-scheduler.hami-system.svc"],
            "ip_addresses": ["127.0.0.1"],
            "valid_days": 3650,
            "renew_days": 365,
            "ca_crt": "ca",
            "tls_crt": "crt",
            "tls_key": "key",
            "not_after": FAR,
            "fingerprint": "f",
        },
    }
    props = dict(samples[cls.__name__])
    for key in cls.CONNECTION:
        props[key] = kubeconfig
    return props


def kubeconfig(server: str, token: str = "old") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "t", "cluster": {"server": server}}],
            "users": [{"name": "t", "user": {"token": token}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            "current-context": "t",
        }
    )


class _Refuses(BaseHTTPRequestHandler):
    """An API server that refuses every credential (a token that lapsed)."""

    requests: list[str] = []

    def _refuse(self) -> None:
        type(self).requests.append(f"{self.command} {self.path}")
        body = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401}
        ).encode()
        self.send_response(401, "Unauthorized")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815 - http.server API

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def refusing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def unreachable() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


ALL = providers()
CONNECTED = [c for c in ALL if c.CONNECTION]


def test_every_provider_has_a_sample_state():
    """The tests below cover every provider: a new one needs its sample here."""
    for cls in ALL:
        assert state(cls, "k")


# -- item 7: rotating a credential re-runs no gate -------------------------------------------
@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_a_credential_is_connection_data_and_a_secret(cls):
    """No provider lists a credential as an input that updates or replaces it: how the tenant is
    reached is not what the resource is."""
    assert set(cls.CONNECTION) <= set(cls.SECRETS)
    assert not set(cls.CONNECTION) & (set(cls.UPDATES) | set(cls.REPLACES))


@pytest.mark.parametrize("cls", CONNECTED, ids=lambda c: c.__name__)
def test_rotating_a_credential_reruns_no_gate_and_stores_the_new_one(monkeypatch, cls):
    """A renewed token alone: the diff reports a change (so the engine stores the new value:
    a "no change" would keep the old credential for every later update and delete), the update
    asks the tenant nothing (no wait, no probe, no write) and keeps what was computed before."""
    module = importlib.import_module(cls.__module__)

    def no_call(*_a: object, **_k: object) -> None:
        raise AssertionError(f"{cls.__name__} asked the tenant for a credential change alone")

    monkeypatch.setattr(module, "core_api", no_call, raising=False)
    olds = state(cls, kubeconfig("https://tenant:6443", "old"))
    news = state(cls, kubeconfig("https://tenant:6443", "renewed"))
    diff = cls().diff("id", olds, news)
    assert diff.changes is True and diff.replaces == []
    outs = cls().update("id", olds, news).outs
    assert outs == news, "the update stores the new credential and keeps the outputs"


def test_a_credential_rotated_with_real_work_does_the_work_with_the_new_one(monkeypatch):
    """A new generation of a Deployment and a renewed token at once: the rollout is awaited, with
    the renewed token."""
    from components.providers import release_wait as rw

    used: list[str] = []

    def recorded(kc: str) -> None:
        used.append(yaml.safe_load(kc)["users"][0]["user"]["token"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(rw, "core_api", recorded)
    olds = state(rw.ReleaseWaitProvider, kubeconfig("https://tenant:6443", "old"))
    news = {**state(rw.ReleaseWaitProvider, kubeconfig("https://tenant:6443", "renewed")), "generation": 2}
    with pytest.raises(RuntimeError, match="stop here"):
        rw.ReleaseWaitProvider().update("ml/trainer", olds, news)
    assert used == ["renewed"]


def test_a_bootstrap_token_judged_after_a_rotation_asks_with_the_new_credential(monkeypatch):
    """The token's update looks at the pool's Nodes (no wait): with the renewed credential."""
    from components.providers import bootstrap_token as bt

    used: list[str] = []

    def recorded(kc: str) -> None:
        used.append(yaml.safe_load(kc)["users"][0]["user"]["token"])
        raise ConnectionError("tenant down")

    monkeypatch.setattr(bt, "core_api", recorded)
    joins = {"labels": {"gpu-tenancy/pool": "a100"}, "expected": 2}
    olds = {**state(bt.BootstrapTokenProvider, kubeconfig("https://tenant:6443", "old")), "joins": joins}
    news = {**state(bt.BootstrapTokenProvider, kubeconfig("https://tenant:6443", "renewed")), "joins": joins}
    outs = bt.BootstrapTokenProvider().update("abc123", olds, news).outs
    assert "renewed" in used and "old" not in used
    assert outs["kubeconfig"] == news["kubeconfig"] and outs["token"] == olds["token"]


# -- item 7: a destroy with a refused credential ----------------------------------------------
HOLDS_NOTHING = [
    c
    for c in ALL
    if c.__name__
    in {
        "BoundTokenProvider",  # revoked with its ServiceAccount, which the stack deletes
        "ControlPlaneSettledProvider",  # only reads the tenant
        "HamiRegistrationProvider",
        "HamiWebhookProbeProvider",  # its probe pod is a dry run: never stored
        "MachinesJoinedProvider",  # only reads the tenant's Nodes
        "NodeDrainProvider",
        "NodeSettledProvider",
        "ReleaseWaitProvider",
        "TenantVersionProvider",
        "WebhookCertificateProvider",  # made in the engine; the Secret carrying it is a plain resource
    }
]
HOLDS_SOMETHING = [c for c in ALL if c not in HOLDS_NOTHING]


def test_whether_a_provider_holds_something_is_decided_for_each():
    assert {c.__name__ for c in HOLDS_SOMETHING} == {
        "BootstrapTokenProvider",
        "DataStoreTeardownProvider",
        "NodeGpuCapacityProvider",
        "NodeMembershipProvider",
        "SimulatedNodesProvider",
    }
    for cls in HOLDS_NOTHING:
        assert cls.remove is base.Provider.remove, f"{cls.__name__} removes something: move it"


@pytest.mark.parametrize("cls", HOLDS_NOTHING, ids=lambda c: c.__name__)
def test_a_gate_is_deleted_with_a_refused_credential_without_asking(refusing, cls):
    """A gate holds nothing in the tenant: its delete never asks, so a destroy after the token
    lapsed passes."""
    _Refuses.requests.clear()
    cls().delete("id", state(cls, kubeconfig(refusing)))
    assert _Refuses.requests == []


@pytest.mark.parametrize("cls", HOLDS_SOMETHING, ids=lambda c: c.__name__)
def test_what_holds_something_says_what_to_do_when_its_credential_is_refused(refusing, cls):
    _Refuses.requests.clear()
    with pytest.raises(base.CredentialRefusedError) as refused:
        cls().delete("the-id", state(cls, kubeconfig(refusing)))
    assert _Refuses.requests, "it asked the tenant"
    said = str(refused.value)
    assert said.startswith(f"{cls.__name__.removesuffix('Provider')} the-id: the tenant refused")
    assert "401" in said and "`pulumi up` stores the current credential" in said and "\n" not in said


# -- item 14: a refresh never fails on a tenant it cannot ask -----------------------------------
@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize("tenant", ["unreachable", "refusing"])
def test_a_read_of_a_tenant_that_cannot_be_asked_keeps_the_state(request, cls, tenant):
    """Unreachable (nothing listens) or refusing the credential (401): no finding, no error, and
    so no drift: the next `up` neither fails in its refresh nor waits a gate again."""
    props = state(cls, kubeconfig(request.getfixturevalue(tenant)))
    read = cls().read("the-id", props)
    assert read.id == "the-id" and read.outs == props
    assert not cls().diff("the-id", read.outs, props).changes


def test_every_provider_with_its_own_read_is_covered():
    """The providers that look at the tenant in a refresh (the rest keep the state as it is)."""
    looks = {c.__name__ for c in ALL if c.look is not base.Provider.look}
    assert looks == {
        "HamiRegistrationProvider",
        "HamiWebhookProbeProvider",
        "MachinesJoinedProvider",
        "NodeGpuCapacityProvider",
        "SimulatedNodesProvider",
    }
    for cls in ALL:
        assert cls.read is base.Provider.read, f"{cls.__name__} overrides read: override look instead"


# -- item 13: the mock label moves; a pool made before follows ----------------------------------
class _Nodes:
    """The node calls SimulatedNodes makes, on plain dicts."""

    def __init__(self, labels: dict[str, dict[str, str]]):
        self.labels = labels

    def create_node(self, body: dict[str, Any], **_k: Any) -> Answer:
        from kubernetes.client import ApiException

        name = body["metadata"]["name"]
        if name in self.labels:
            raise ApiException(status=409, reason="AlreadyExists")
        self.labels[name] = dict(body["metadata"]["labels"])
        return Answer(body)

    def patch_node(self, name: str, body: dict[str, Any], **_k: Any) -> Answer:
        for key, value in (body.get("metadata") or {}).get("labels", {}).items():
            if value is None:
                self.labels[name].pop(key, None)
            else:
                self.labels[name][key] = value
        return Answer({"metadata": {"name": name, "labels": self.labels[name]}})

    def patch_node_status(self, *_a: Any, **_k: Any) -> Answer:
        return Answer({})

    def list_node(self, label_selector: str = "", **_k: Any) -> Any:
        from types import SimpleNamespace

        wanted = dict(p.split("=", 1) for p in label_selector.split(",") if p)
        items = [
            {"metadata": {"name": n, "labels": ls}}
            for n, ls in self.labels.items()
            if all(ls.get(k) == v for k, v in wanted.items())
        ]
        return SimpleNamespace(data=json.dumps({"items": items}).encode())


def test_a_kwok_pool_made_with_the_old_mock_label_gets_the_new_one_on_the_next_up(monkeypatch):
    nodes = _Nodes({})
    monkeypatch.setattr(sn, "core_api", lambda *_a, **_k: nodes)
    p = sn.SimulatedNodesProvider()
    news = state(sn.SimulatedNodesProvider, "k")
    p.create({**news, "names": ["sim-0", "sim-1"]})
    for ls in nodes.labels.values():  # as a pool made before the label moved
        del ls[MOCK_GPU_NODE_LABEL[0]]
        ls[sn.LEGACY_MOCK_LABEL_KEY] = "true"
    olds = {k: v for k, v in news.items() if k != "mock_label"}  # its state has no mock_label
    olds["names"] = news["names"] = ["sim-0", "sim-1"]
    assert p.diff("team-a/sim", olds, news).changes
    p.update("team-a/sim", olds, news)
    for ls in nodes.labels.values():
        assert ls[MOCK_GPU_NODE_LABEL[0]] == MOCK_GPU_NODE_LABEL[1]
        assert sn.LEGACY_MOCK_LABEL_KEY not in ls
    assert not p.diff("team-a/sim", news, news).changes  # a second up changes nothing


def test_the_mock_label_is_one_a_kubelet_cannot_set_on_itself():
    """NodeRestriction refuses a kubelet's own labels under this prefix (kubernetes.io/ and
    k8s.io/ otherwise are its to set, and any other prefix is too); the integration tier shows
    the API server refusing it (test_mock_label_node_restriction)."""
    key, value = MOCK_GPU_NODE_LABEL
    assert key.startswith("node-restriction.kubernetes.io/") and value == "true"
    name = key.split("/", 1)[1]
    assert len(name) <= 63 and name.replace("-", "").isalnum()
