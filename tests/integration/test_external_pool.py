"""An external pool through the real engine against the real API server with
kube-controller-manager's tokencleaner, following the join steps in docs/worker-pools.md: the join is a
JoinConfiguration only (the token never on argv) that pins the tenant CA as kubeadm computes it;
the token is a secret output, expires and is removed; the next `up` renews it while machines are
still to join, revokes it once all `nodes` are Nodes (other pools' Nodes do not count), issues a
fresh one when a machine goes or `nodes` is raised, and destroy leaves none. kubeadm itself does
not run here: a joined machine is its Node object, created as its kubelet would."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.lifecycle import bootstrap_token as bs
from components.tenant.external_pool import external_labels
from tests.support.cluster import TOKEN
from tests.support.waits import settles

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).parent / "programs" / "external_pool"
ENDPOINT = "203.0.113.10:31443"
TTL = 20
pytestmark = pytest.mark.integration


@pytest.fixture
def stack(pulumi_cli, with_tokencleaner, tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed: the documented join step uses it (.ci/run installs it)")
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", with_tokencleaner.kubeconfig_text)
    pulumi_cli("config", "set", "endpoint", ENDPOINT, cwd=work)
    pulumi_cli("config", "set", "ttlSeconds", str(TTL), cwd=work)
    pulumi_cli("config", "set", "machines", "2", cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", cwd=work, check=False)
    core = with_tokencleaner.core()
    for node in core.list_node(label_selector="gpu-tenancy/tenant=team-a").items:
        core.delete_node(node.metadata.name)


def kubeadm_pin(crt: Path) -> str:
    """kubeadm's documented recipe, computed with openssl alone."""
    pubkey = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", str(crt)], capture_output=True, check=True)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pubkey.stdout, capture_output=True)
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-hex"], input=der.stdout, capture_output=True)
    return "sha256:" + digest.stdout.decode().split()[-1]


def live_token(core, tid: str) -> str | None:
    try:
        secret = core.read_namespaced_secret(bs.token_secret_name(tid), bs.TOKEN_NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return None
    return f"{tid}.{base64.b64decode(secret.data['token-secret']).decode()}"


def readme_step() -> str:
    """The documented command that writes a machine's join.yaml (docs/worker-pools.md, for its
    team-gpu/a100 example)."""
    text = (ROOT / "docs" / "worker-pools.md").read_text()
    (line,) = [ln for ln in text.splitlines() if "> join.yaml" in ln and "pulumi stack output" in ln]
    return line.split("#")[0].strip()


def join_yaml(pulumi_cli, stack) -> dict:
    """Run the documented step as written (tenant and pool swapped for the test's) in the stack."""
    step = readme_step().replace("team-gpu", "team-a").replace(".a100.", ".gpus.")
    subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=stack, env=pulumi_cli.env, check=True)
    written = stack / "join.yaml"
    doc = yaml.safe_load(written.read_text())
    written.unlink()
    return doc


def join(pulumi_cli, stack) -> dict:
    out = json.loads(pulumi_cli("stack", "output", "team-a", "--json", "--show-secrets", cwd=stack).stdout)
    return out["pools"]["gpus"]["join"]


def register(core, name: str, labels: dict[str, str]) -> None:
    """What a joined machine's kubelet does: register its Node with the join's labels."""
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})


def up(pulumi_cli, stack) -> str:
    return pulumi_cli("up", "--yes", "--skip-preview", cwd=stack).stdout


def test_join_is_pinned_secret_renewed_until_all_joined_then_revoked(pulumi_cli, with_tokencleaner, stack):
    core = with_tokencleaner.core()
    started = datetime.now(UTC)
    up(pulumi_cli, stack)
    plain = json.loads(pulumi_cli("stack", "output", "team-a", "--json", cwd=stack).stdout)
    assert plain == "[secret]" or plain["pools"]["gpus"]["join"] == "[secret]"
    tid = json.loads(pulumi_cli("stack", "output", "tokenId", "--json", cwd=stack).stdout)
    token = live_token(core, tid)
    assert token is not None
    first = join(pulumi_cli, stack)
    assert set(first) == {"configuration", "labels", "expires", "status"}, "the configuration form only"
    assert "kubeadm join" not in json.dumps(first)

    config = join_yaml(pulumi_cli, stack)
    assert config["kind"] == "JoinConfiguration"
    pin = kubeadm_pin(with_tokencleaner.workdir / "ca.crt")
    discovery = config["discovery"]["bootstrapToken"]
    assert discovery == {"apiServerEndpoint": ENDPOINT, "token": token, "caCertHashes": [pin]}
    (arg,) = config["nodeRegistration"]["kubeletExtraArgs"]
    labels = dict(kv.split("=") for kv in arg["value"].split(","))
    assert labels == external_labels("team-a", "gpus")
    expires = datetime.fromisoformat(first["expires"].replace("Z", "+00:00"))
    assert 0 < (expires - started).total_seconds() <= TTL + 60
    state = json.dumps(json.loads(pulumi_cli("stack", "export", cwd=stack).stdout))
    assert token not in state and TOKEN not in state, "a token is in the state in clear text"
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)  # a second up changes nothing

    # It expires and the tokencleaner removes it, before any machine joined:
    settles(lambda: live_token(core, tid) is None, timeout=TTL + 90, interval=1)
    assert live_token(core, tid) is None, "the expired join token is still there"
    # ... so the next up issues a fresh one (docs/worker-pools.md: a lapsed token needs `pulumi up` alone).
    pulumi_cli("config", "set", "ttlSeconds", "3600", cwd=stack)
    up(pulumi_cli, stack)
    renewed = live_token(core, tid)
    assert renewed is not None and renewed != token
    assert join_yaml(pulumi_cli, stack)["discovery"]["bootstrapToken"]["token"] == renewed
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)

    # Another pool's Node does not count; one of two machines joined: the token stays.
    register(core, "other-pool-0", external_labels("team-a", "other"))
    register(core, "gpus-0", labels)
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)
    # The second machine joins: the next up revokes the token; the output says the join is closed.
    register(core, "gpus-1", labels)
    assert re.search(r"~\s+1 to update", pulumi_cli("preview", cwd=stack).stdout)
    up(pulumi_cli, stack)
    assert live_token(core, tid) is None, "the join token outlived the joins"
    closed = join(pulumi_cli, stack)
    assert set(closed) == {"labels", "status"} and closed["status"].startswith("closed: all 2 machines joined")
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)

    # A machine goes (its Node removed): the next up opens the pool with a fresh token.
    core.delete_node("gpus-1")
    up(pulumi_cli, stack)
    healed = live_token(core, tid)
    assert healed not in (None, token, renewed)
    assert join(pulumi_cli, stack)["status"].startswith("open until")
    register(core, "gpus-1", labels)
    up(pulumi_cli, stack)
    assert live_token(core, tid) is None
    # More machines planned (`nodes` raised): a fresh token again.
    pulumi_cli("config", "set", "machines", "3", cwd=stack)
    up(pulumi_cli, stack)
    assert live_token(core, tid) is not None

    pulumi_cli("destroy", "--yes", cwd=stack)
    assert live_token(core, tid) is None
