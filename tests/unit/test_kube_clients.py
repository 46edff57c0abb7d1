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


def test_default_timeout_is_set_for_calls_that_give_none(monkeypatch):
    from kubernetes.client import rest

    seen = []

    def request(self, method, url, _request_timeout=None, **kwargs):
        seen.append(_request_timeout)
        raise rest.ApiException(status=404)

    monkeypatch.setattr(rest.RESTClientObject, "request", request)
    core = kube.core_api(kubeconfig(1), timeout=(2.0, 3.0))
    for call in (lambda: core.read_node("n"), lambda: core.read_node("n", _request_timeout=(9, 9))):
        with pytest.raises(rest.ApiException):
            call()
    assert seen == [(2.0, 3.0), (9, 9)]


def test_the_client_library_is_used_through_its_public_names_only():
    """No private name of the kubernetes package is read or replaced (the per-call keywords
    `_request_timeout` and `_preload_content` are its documented parameters)."""
    for path in [*ROOT.glob("components/**/*.py"), *ROOT.glob("policy/*.py")]:
        tree = ast.parse(path.read_text())
        kube_names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kubernetes"):
                kube_names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                kube_names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("kubernetes")}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                assert not (isinstance(base, ast.Name) and base.id in kube_names), (
                    f"{path}:{node.lineno}: {ast.unparse(node)} is a private name of the kubernetes client"
                )


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
    with open(cfg.cert_file, "rb") as f:
        assert f.read() == cert
    assert list(tmp_path.iterdir()) == [], "the client wrote key material to a temp file"


def test_a_kubeconfig_naming_files_is_used_as_written(tmp_path):
    """Files a kubeconfig names stay its files (only inline material goes to memory)."""
    from tests.support.cluster import self_signed

    crt, key = self_signed(tmp_path, "client", "/CN=client")
    doc = yaml.safe_load(kubeconfig(1))
    doc["users"][0]["user"] = {"client-certificate": str(crt), "client-key": str(key)}
    cfg = kube.api_client(yaml.safe_dump(doc)).configuration
    assert (cfg.cert_file, cfg.key_file) == (str(crt), str(key))
    assert cfg.ssl_ca_cert.startswith("/proc/self/fd/")


def test_the_same_material_is_one_in_memory_file_and_the_callers_kubeconfig_is_left_as_given():
    doc = yaml.safe_load(kubeconfig(1))
    before = yaml.safe_dump(doc)
    first, second = (kube.api_client(yaml.safe_dump(doc)).configuration for _ in range(2))
    assert first.ssl_ca_cert == second.ssl_ca_cert
    assert yaml.safe_dump(doc) == before
    assert "certificate-authority-data" in doc["clusters"][0]["cluster"]


def test_answers_are_read_through_the_client_module_only():
    """`_preload_content=False` hands back an unread answer; one left unread keeps its
    connection out of the pool, and the next request pays a new TLS handshake. Only
    kube.client.read_answer (and send/get_json on it) asks for one, and it reads it whole."""
    for path in [*ROOT.glob("components/**/*.py"), *ROOT.glob("policy/*.py"), ROOT / "__main__.py"]:
        if path == ROOT / "components/kube/client.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                assert "_preload_content" not in {k.arg for k in node.keywords}, (
                    f"{path}:{node.lineno}: _preload_content outside components/kube/client.py "
                    "(use get_json, send or read_answer)"
                )


def test_send_reads_the_answer_so_its_connection_is_used_again():
    class Answer:
        def __init__(self):
            self.read = False

        @property
        def data(self):
            self.read = True
            return b"{}"

    answers = []

    def call(*args, _preload_content=True, **kwargs):
        assert _preload_content is False
        answers.append(Answer())
        return answers[-1]

    kube.send(call, "node", {"patch": 1})
    assert kube.get_json(call) == {}
    assert [a.read for a in answers] == [True, True]
