"""An external pool through the real engine against the real API server with
kube-controller-manager's tokencleaner: the join command and configuration pin the tenant CA as
kubeadm computes it, the token is a secret output, it expires and is removed, a replaced token
is a new one, and destroy leaves none."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.ops import bootstrap as bs
from tests.integration.cluster import TOKEN

PROGRAM = Path(__file__).parent / "programs" / "external_pool"
ENDPOINT = "203.0.113.10:31443"
TTL = 20
pytestmark = pytest.mark.integration


@pytest.fixture
def stack(pulumi_cli, with_tokencleaner, tmp_path):
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", with_tokencleaner.kubeconfig_text)
    pulumi_cli("config", "set", "endpoint", ENDPOINT, cwd=work)
    pulumi_cli("config", "set", "ttlSeconds", str(TTL), cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", cwd=work, check=False)


def kubeadm_pin(crt: Path) -> str:
    """kubeadm's documented recipe, computed with openssl alone."""
    pubkey = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", str(crt)], capture_output=True, check=True)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pubkey.stdout, capture_output=True)
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-hex"], input=der.stdout, capture_output=True)
    return "sha256:" + digest.stdout.decode().split()[-1]


def token_secret(core, tid: str) -> client.V1Secret | None:
    try:
        return core.read_namespaced_secret(bs.token_secret_name(tid), bs.TOKEN_NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return None


def outputs(pulumi_cli, stack) -> dict:
    return json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=stack).stdout)


def test_join_is_pinned_secret_and_its_token_expires(pulumi_cli, with_tokencleaner, stack):
    core = with_tokencleaner.core()
    started = datetime.now(UTC)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    plain = json.loads(pulumi_cli("stack", "output", "--json", cwd=stack).stdout)
    assert plain["join"] == "[secret]"
    out = outputs(pulumi_cli, stack)
    join, tid = out["join"], out["tokenId"]
    pin = kubeadm_pin(with_tokencleaner.workdir / "ca.crt")

    secret = token_secret(core, tid)
    assert secret is not None
    token = f"{tid}.{base64.b64decode(secret.data['token-secret']).decode()}"
    assert join["command"] == f"kubeadm join {ENDPOINT} --token {token} --discovery-token-ca-cert-hash {pin}"
    config = yaml.safe_load(join["configuration"])
    assert config["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": ENDPOINT,
        "token": token,
        "caCertHashes": [pin],
    }
    labels = dict(kv.split("=") for kv in config["nodeRegistration"]["kubeletExtraArgs"][0]["value"].split(","))
    assert (
        labels["gpu"] == "on" and labels["gpu-tenancy/pool"] == "gpus" and labels["gpu-tenancy/pool-mode"] == "external"
    )
    expires = datetime.fromisoformat(join["expires"].replace("Z", "+00:00"))
    assert 0 < (expires - started).total_seconds() <= TTL + 60
    state = json.dumps(json.loads(pulumi_cli("stack", "export", cwd=stack).stdout))
    assert token not in state and TOKEN not in state, "a token is in the state in clear text"

    # It expires, and kube-controller-manager's tokencleaner removes it.
    deadline = time.monotonic() + TTL + 90
    while time.monotonic() < deadline and token_secret(core, tid) is not None:
        time.sleep(1)
    assert token_secret(core, tid) is None, "the expired join token is still there"
    # An expired token is not drift: `up` changes nothing; replacing it issues a new one.
    again = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert "created" not in again.stdout and "updated" not in again.stdout, again.stdout
    resources = json.loads(pulumi_cli("stack", "export", cwd=stack).stdout)["deployment"]["resources"]
    urn = next(r["urn"] for r in resources if r["urn"].endswith("::team-a-gpus-token"))
    pulumi_cli("config", "set", "ttlSeconds", "3600", cwd=stack)  # long enough to be seen
    pulumi_cli("up", "--yes", "--skip-preview", "--replace", urn, cwd=stack)
    renewed = outputs(pulumi_cli, stack)["join"]
    assert renewed["command"] != join["command"] and token_secret(core, tid) is not None

    pulumi_cli("destroy", "--yes", cwd=stack)
    assert token_secret(core, tid) is None
