"""The release controller's process: its command line refuses a bad argument in one line naming
it (exit code 2, no traceback), and its HTTP server hangs up slow callers, serves a bounded number
at once and listens on loopback in the lab's image (KWOK's server too)."""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

import pytest

from components.controllers.kwok import KWOK_PORT
from components.controllers.release import controller as rc
from components.controllers.release import daemon
from components.controllers.release.scrape import DEFAULT_HOST, DEFAULT_PORT
from components.tenant.kwok_controller import kwok_command
from tests.support.fake_kube import FakeCore
from tests.support.release_process import free_port
from tests.support.waits import settles

ROOT = Path(__file__).resolve().parents[2]
CERT_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Zm9v}}]
users: [{name: admin, user: {client-certificate-data: Zm9v, client-key-data: Zm9v}}]
contexts: [{name: ctx, context: {cluster: c, user: admin}}]
current-context: ctx
"""


def one_line_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        daemon.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def kubeconfig(tmp_path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(CERT_KUBECONFIG)
    return str(path)


def test_a_kubeconfig_that_cannot_be_read_is_one_line(capsys, tmp_path):
    line = one_line_error(capsys, ["--kubeconfig", str(tmp_path / "nope")])
    assert "--kubeconfig" in line and "No such file" in line
    line = one_line_error(capsys, ["--kubeconfig", str(tmp_path)])  # a directory
    assert "--kubeconfig" in line


@pytest.mark.parametrize("text", ["not: [yaml", "apiVersion: v1\nkind: Config\n", "[]"])
def test_a_kubeconfig_without_a_usable_context_is_one_line(capsys, tmp_path, text):
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert "--kubeconfig" in one_line_error(capsys, ["--kubeconfig", str(path), "--once"])


def test_token_file_with_a_client_certificate_kubeconfig_is_one_line(capsys, kubeconfig, tmp_path):
    line = one_line_error(capsys, ["--kubeconfig", kubeconfig, "--token-file", str(tmp_path / "token")])
    assert "--token-file" in line and "no token" in line


@pytest.mark.parametrize("value", ["localhost", "localhost:", ":http", "127.0.0.1:0", "127.0.0.1:70000", "::1:9400"])
def test_listen_without_a_usable_port_is_one_line(capsys, kubeconfig, value):
    assert "--listen" in one_line_error(capsys, ["--kubeconfig", kubeconfig, "--listen", value])


def test_listen_on_an_address_in_use_is_one_line(capsys, kubeconfig):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line_error(capsys, ["--kubeconfig", kubeconfig, "--listen", f"127.0.0.1:{port}"])
    assert "--listen" in line and "in use" in line


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--workers", "0"),
        ("--workers", "-3"),
        ("--workers", "many"),
        ("--stuck-seconds", "0"),
        ("--stuck-seconds", "nan"),
        ("--max-queue-wait", "-1"),
        ("--exit-when-unhealthy", "inf"),
        ("--node-selector", "no-equals"),
        ("--log-level", "LOUD"),
        ("--readmit", "no-slash"),
        ("--readmit", "ns/"),
        ("--readmit", "a/b/c"),
    ],
)
def test_a_value_that_would_do_nothing_or_fail_later_is_one_line(capsys, kubeconfig, flag, value):
    assert flag in one_line_error(capsys, ["--kubeconfig", kubeconfig, flag, value])


def test_the_controller_refuses_no_workers():
    with pytest.raises(ValueError, match="workers"):
        rc.ReleaseController(FakeCore(), workers=0)


@pytest.mark.parametrize(
    "value, address", [(":9401", (DEFAULT_HOST, 9401)), ("0.0.0.0:1", ("0.0.0.0", 1)), ("[::1]:9400", ("::1", 9400))]
)
def test_listen_forms(value, address):
    assert daemon._listen(value) == address


# -- the HTTP server --------------------------------------------------------------------------------
@pytest.fixture
def served():
    servers = []

    def start(**kwargs):
        c = rc.ReleaseController(FakeCore())
        c.synced.set()
        port = free_port()
        servers.append(daemon.serve_http(c, "127.0.0.1", port, **kwargs))
        return port

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(port: int, path: str = "/healthz") -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return resp.status


def test_http_server_hangs_up_a_caller_that_never_sends_its_request(served):
    port = served(timeout=0.2)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the end of the headers
        assert slow.recv(1024) == b"", "the server kept waiting for the caller"
    assert get(port) == 200


def test_http_server_serves_a_bounded_number_of_callers_at_once(served):
    port = served(timeout=60, handlers=2)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as third:
            third.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            try:
                answer = third.recv(1024)
            except ConnectionResetError:
                answer = b""
            assert answer == b"", "a third handler was started"
    finally:
        for s in idle:
            s.close()

    def answered() -> bool:
        try:
            return get(port) == 200
        except OSError:
            return False

    assert settles(answered, timeout=10, interval=0.05), "slots were not given back"


# -- where the lab listens ----------------------------------------------------------------------------
def test_the_image_listens_on_loopback_and_checks_health_there():
    dockerfile = (ROOT / "components/controllers/release/Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT (.*)$", dockerfile, re.M).group(1)
    assert f'"--listen", "{DEFAULT_HOST}:{DEFAULT_PORT}"' in entry and "0.0.0.0" not in dockerfile
    assert '"components.controllers.release.scrape", "/healthz"' in dockerfile
    assert DEFAULT_HOST == "127.0.0.1"


def test_kwok_serves_on_loopback_only():
    args = kwok_command("/k", "10.244.0.0/16", "/s")
    assert [a for a in args if a.startswith("--server-address")] == [f"--server-address=127.0.0.1:{KWOK_PORT}"]


def test_scrape_prints_what_the_controller_serves_and_fails_when_unhealthy(served, monkeypatch, capsys):
    from components.controllers.release import scrape

    port = served()
    monkeypatch.setattr(scrape, "DEFAULT_PORT", port)
    assert scrape.main([]) == 0 and "gpu_tenancy_pods_stuck" in capsys.readouterr().out
    assert scrape.main(["/healthz"]) == 0
    monkeypatch.setattr(scrape, "DEFAULT_PORT", free_port())
    assert scrape.main(["/healthz"]) == 1
