"""Bound controller tokens on a real kube-apiserver: issued with an expiry (TokenRequest), renewed
by the keeper with the token itself and for that account alone, read before every request by the
release controller's client, and re-read from its file by KWOK itself (client-go's tokenFile) once
the old token is revoked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from datetime import datetime

import pytest
from kubernetes import client

from components.controllers.kwok import KWOK_NODE_ANNOTATION, KWOK_RBAC_RULES, NODE_STAGES, kwok_args
from components.kube import bound_token as bt
from components.kube.client import cluster_ca, core_api, http_status, token_file_kubeconfig, token_kubeconfig
from components.kube.waiting import wait_until
from tests.support.cluster import free_port
from tests.support.tools import require

pytestmark = pytest.mark.integration
NS = "kube-system"


def account(cluster, rules, name: str | None = None) -> str:
    """A ServiceAccount with `rules` and the right to renew its own token."""
    name = name or f"keeper-{uuid.uuid4().hex[:6]}"
    core = cluster.core()
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    core.create_namespaced_service_account(NS, {"metadata": {"name": name}})
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": NS}]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [dict(r) for r in rules]})
    rbac.create_cluster_role_binding(
        {"metadata": {"name": name}, "roleRef": _ref("ClusterRole", name), "subjects": subject}
    )
    rbac.create_namespaced_role(NS, {"metadata": {"name": name}, "rules": bt.self_renewal_rules(name)})
    rbac.create_namespaced_role_binding(
        NS, {"metadata": {"name": name}, "roleRef": _ref("Role", name), "subjects": subject}
    )
    return name


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def kubeconfig(cluster, token: str) -> str:
    return token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token)


def works(cluster, token: str) -> int:
    try:
        core_api(kubeconfig(cluster, token)).list_node(limit=1)
        return 200
    except Exception as exc:
        return http_status(exc) or 0


def test_a_token_is_bound_and_expires_when_the_api_server_says(cluster):
    name = account(cluster, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    token, expiry = bt.request_token(cluster.core(), NS, name, 3600)
    exp = bt.expires(token)
    assert exp == datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp()
    assert 3600 - 60 < exp - time.time() <= 3600
    assert bt.account_of(token) == (NS, name)
    assert works(cluster, token) == 200
    # deleting the account revokes the token
    cluster.core().delete_namespaced_service_account(name, NS)
    wait_until(lambda: works(cluster, token) == 401, timeout=20, what="the token to be refused")


def test_the_keeper_renews_with_the_token_itself_and_for_its_own_account_only(cluster, tmp_path):
    name = account(cluster, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    other = account(cluster, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    first, _ = bt.request_token(cluster.core(), NS, name, 3600)
    path = tmp_path / "token"
    later = {"now": time.time()}
    keeper = bt.TokenKeeper(kubeconfig(cluster, first), path, seconds=7200, clock=lambda: later["now"])
    # fresh: the stack's token is kept in the file as it is
    assert keeper.renew_if_due() is True and path.read_text().strip() == first
    assert keeper.renew_if_due() is False
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    # past two thirds of its life: a new token, longer-lived, issued with the old one
    later["now"] = time.time() + 2500
    assert keeper.renew_if_due() is True
    second = path.read_text().strip()
    assert second != first and bt.expires(second) > bt.expires(first) + 3000
    assert bt.account_of(second) == (NS, name) and works(cluster, second) == 200
    assert keeper.current() == second
    # the account may renew only itself
    with pytest.raises(client.ApiException) as refused:
        bt.request_token(core_api(kubeconfig(cluster, second)), NS, other, 3600)
    assert refused.value.status == 403
    # every token expired: a plain error naming the repair
    later["now"] = time.time() + 10 * 3600
    with pytest.raises(bt.TokenExpiredError, match="run `pulumi up` to issue"):
        keeper.renew_if_due()


def test_the_release_controllers_client_asks_for_its_token_before_every_request(cluster, tmp_path):
    name = account(cluster, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    token, _ = bt.request_token(cluster.core(), NS, name, 3600)
    held = {"token": "not-a-valid-token"}
    core = core_api(kubeconfig(cluster, "not-a-valid-token"), token=lambda: held["token"])
    with pytest.raises(client.ApiException) as refused:
        core.list_node(limit=1)
    assert refused.value.status == 401
    held["token"] = token  # what the keeper does when it renews
    core.list_node(limit=1)


def test_the_release_controller_renews_into_its_token_file(cluster, tmp_path):
    """`--token-file`: the controller starts from the stack's token and keeps the file current."""
    from components.controllers.release.policy import RBAC_RULES
    from tests.support.release_process import ROOT

    name = account(cluster, RBAC_RULES)
    token, _ = bt.request_token(cluster.core(), NS, name, 3600)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(cluster, token))
    path = tmp_path / "state" / "token"
    path.parent.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "components.controllers.release",
            "--kubeconfig",
            str(config),
            "--token-file",
            str(path),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "controller.log").open("w"),
    )
    try:
        wait_until(lambda: path.exists() and path.read_text().strip() == token, timeout=30, what="the token file")
    finally:
        proc.terminate()
        proc.wait(10)
    # every token expired: the controller stops at once and says how to repair
    path.unlink()
    expired = tmp_path / "expired"
    expired.write_text(kubeconfig(cluster, _expired_like(token)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "components.controllers.release",
            "--kubeconfig",
            str(expired),
            "--token-file",
            str(path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "run `pulumi up` to issue" in done.stderr


def _expired_like(token: str) -> str:
    """The same claims with `exp` in the past (unsigned: the keeper reads, never trusts, claims)."""
    import base64
    import json

    head, _, sig = token.split(".")
    claims = {**bt.claims(token), "exp": int(time.time()) - 60, "iat": int(time.time()) - 3600}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{head}.{body}.{sig}"


def test_kwok_rereads_its_token_file_after_renewal(tools, cluster, tmp_path):
    """KWOK on a tokenFile kubeconfig: the file swapped for another account's token and the first
    account deleted (its tokens refused), a node made afterwards still becomes Ready."""
    require(tools, "kwok")
    first = account(cluster, KWOK_RBAC_RULES)
    second = account(cluster, KWOK_RBAC_RULES)
    core = cluster.core()
    path = tmp_path / "token"
    path.write_text(bt.request_token(core, NS, first, 3600)[0])
    config = tmp_path / "kubeconfig"
    config.write_text(
        token_file_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), str(path))
    )
    stages = tmp_path / "stages.yaml"
    stages.write_text(NODE_STAGES)
    args = [a for a in kwok_args(str(config), "10.250.0.0/16", str(stages)) if not a.startswith("--server-address")]
    log = open(tmp_path / "kwok.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [cluster._bin("kwok"), *args, f"--server-address=127.0.0.1:{free_port()}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cluster.env,
    )

    def node(name: str) -> None:
        core.create_node(
            {"metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]}}}
        )

    def ready(name: str) -> bool:
        conditions = (core.read_node(name).status.conditions) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    names = [f"kwok-token-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    try:
        node(names[0])
        wait_until(lambda: ready(names[0]), timeout=60, what=f"{names[0]} Ready")
        old = path.read_text()
        path.write_text(bt.request_token(core, NS, second, 3600)[0])
        core.delete_namespaced_service_account(first, NS)
        wait_until(lambda: works(cluster, old) == 401, timeout=20, what="the first token to be refused")
        node(names[1])
        wait_until(lambda: ready(names[1]), timeout=180, interval=2, what=f"{names[1]} Ready on the renewed token")
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        for n in names:
            core.delete_node(n)
