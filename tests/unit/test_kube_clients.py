"""Every Kubernetes API call the program makes is bounded, and key material never touches disk.

All clients come from components.kube.client (checked in the code), which gives every request a
(connect, read) timeout: shown against a server that accepts connections and never answers."""

from __future__ import annotations

import ast
import base64
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from components.kube import client as kube

ROOT = Path(__file__).resolve().parents[2]
FACTORIES = ("new_client_from_config", "new_client_from_config_dict", "load_kube_config", "load_incluster_config")


def test_only_the_client_factory_makes_kubernetes_clients():
    for path in [*ROOT.glob("components/**/*.py"), *ROOT.glob("policy/*.py"), ROOT / "__main__.py"]:
        if path == ROOT / "components/kube/client.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                assert not (name.endswith("Api") and name[0].isupper()), (
                    f"{path}: {name}() outside components/kube/client.py"
                )
                assert name not in (*FACTORIES, "ApiClient"), f"{path}: {name}() outside components/kube/client.py"


@pytest.fixture
def silent_server():
    """Accepts TCP connections and never sends a byte (a hung API server or load balancer)."""
    listener = socket.create_server(("127.0.0.1", 0))
    conns = []

    def accept():
        while True:
            try:
                conns.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for c in conns:
        c.close()


def kubeconfig(port: int, ca: bytes = b"not a real CA") -> str:
    return kube.token_kubeconfig(f"https://127.0.0.1:{port}", base64.b64encode(ca).decode(), "t")


def test_a_call_to_a_hung_server_ends_at_the_deadline(silent_server, tmp_path):
    from tests.support.cluster import self_signed

    crt, _ = self_signed(tmp_path, "ca", "/CN=test-ca")
    core = kube.core_api(kubeconfig(silent_server, crt.read_bytes()), timeout=(1.0, 1.5))
    started = time.monotonic()
    with pytest.raises(Exception) as err:
        core.read_node("n")  # no timeout given: the client's default applies
    took = time.monotonic() - started
    assert "timed out" in str(err.value).lower() or "timeout" in type(err.value).__name__.lower(), err.value
    assert took < 20, f"the call outlived its deadline: {took:.1f} s"


def test_default_timeout_is_set_for_calls_that_give_none():
    seen = []

    class Rest:
        def request(self, method, url, _request_timeout=None, **kwargs):
            seen.append(_request_timeout)

    class Api:
        rest_client = Rest()

    bounded = kube._with_default_timeout(Api(), (2.0, 3.0))
    bounded.rest_client.request("GET", "https://x")
    bounded.rest_client.request("GET", "https://x", _request_timeout=(9, 9))
    assert seen == [(2.0, 3.0), (9, 9)]


def test_key_material_stays_in_memory(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cert, key = b"-----BEGIN CERTIFICATE-----\nAA==\n", b"-----BEGIN PRIVATE KEY-----\nAA==\n"
    doc = yaml.safe_load(kubeconfig(1))
    doc["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    client = kube.api_client(yaml.safe_dump(doc))
    cfg = client.configuration
    for path in (cfg.cert_file, cfg.key_file, cfg.ssl_ca_cert):
        assert path.startswith("/proc/self/fd/"), path
    with open(cfg.key_file, "rb") as f:
        assert f.read() == key
    assert list(tmp_path.iterdir()) == [], "the client wrote key material to a temp file"
