"""Kubeconfigs with several contexts: every reader takes the cluster and user of current-context,
never the first entries, and a kubeconfig whose current context names nothing it holds gets one
plain error naming what is missing (issue 37, item 12)."""

from __future__ import annotations

import base64
import copy
import io
import json
from pathlib import Path

import pytest
import yaml

from components.kube import bound_token as bt
from components.kube import client as kube
from components.kube import team_token
from components.kube.client import KubeconfigError
from components.lifecycle.bootstrap_token import kubeconfig_ca_hash
from tests.support.certs import self_signed_ca_pem
from tests.support.harness import TENANT_CA, TENANT_CA_HASH


def _ca(name: str) -> str:
    """A self-signed CA certificate, base64 as in a kubeconfig."""
    return base64.b64encode(self_signed_ca_pem(name).encode()).decode()


def _jwt(account: str) -> str:
    def part(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    claims = {"iat": 1_000, "exp": 4_102_444_800, "sub": f"system:serviceaccount:kube-system:{account}"}
    return f"{part({'alg': 'RS256'})}.{part(claims)}.sig"


OTHER_CA = _ca("another-cluster-ca")
FIRST_TOKEN, CHOSEN_TOKEN = _jwt("first"), _jwt("chosen")
# The current context is the second of three, and its cluster and user are listed after others.
MULTI = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "staging", "cluster": {"server": "https://staging:6443", "certificate-authority-data": OTHER_CA}},
            {"name": "lab", "cluster": {"server": "https://lab:6443", "certificate-authority-data": TENANT_CA}},
        ],
        "users": [
            {"name": "staging-admin", "user": {"token": FIRST_TOKEN}},
            {"name": "lab-keeper", "user": {"token": CHOSEN_TOKEN}},
        ],
        "contexts": [
            {"name": "staging", "context": {"cluster": "staging", "user": "staging-admin"}},
            {"name": "lab", "context": {"cluster": "lab", "user": "lab-keeper"}},
            {"name": "lab-as-staging", "context": {"cluster": "lab", "user": "staging-admin"}},
        ],
        "current-context": "lab",
    }
)


def test_the_server_and_ca_are_the_current_contexts_cluster():
    assert kube.cluster_server(MULTI) == "https://lab:6443"
    assert kube.cluster_ca(MULTI) == TENANT_CA


def test_the_join_ca_hash_pins_the_current_contexts_cluster():
    assert kubeconfig_ca_hash(MULTI) == TENANT_CA_HASH


def test_the_endpoint_kubeconfig_keeps_the_current_contexts_cluster_and_user():
    doc = yaml.safe_load(kube.endpoint_kubeconfig(MULTI, "https://lab.example:6443"))
    assert doc["clusters"][0]["cluster"]["certificate-authority-data"] == TENANT_CA
    assert doc["users"][0]["user"] == {"token": CHOSEN_TOKEN}


def test_a_client_talks_to_the_current_contexts_cluster_with_its_user():
    configuration = kube.api_client(MULTI).configuration
    assert configuration.host == "https://lab:6443"
    assert configuration.api_key["BearerToken"] == f"Bearer {CHOSEN_TOKEN}"


class _TokenApi:
    """Answers a TokenRequest with a token of the account asked for."""

    def create_namespaced_service_account_token(self, name, namespace, body, _preload_content=False):
        status = {"token": _jwt(f"{name}-renewed"), "expirationTimestamp": "2100-01-01T00:00:00Z"}
        return type("Answer", (), {"data": json.dumps({"status": status}).encode()})()


def test_the_token_keeper_starts_from_the_current_contexts_user_and_renews_at_its_cluster(tmp_path: Path):
    asked: list[str] = []

    def connect(kubeconfig: str) -> _TokenApi:
        asked.append(kubeconfig)
        return _TokenApi()

    keeper = bt.TokenKeeper(MULTI, tmp_path / "token", clock=lambda: 3_500_000_000.0, connect=connect)
    assert (keeper.namespace, keeper.account) == ("kube-system", "chosen")
    assert keeper.current() == CHOSEN_TOKEN
    assert keeper.renew_if_due() is True  # past two thirds of its life
    (kubeconfig,) = asked
    assert kube.cluster_server(kubeconfig) == "https://lab:6443" and kube.cluster_ca(kubeconfig) == TENANT_CA
    assert yaml.safe_load(kubeconfig)["users"][0]["user"] == {"token": CHOSEN_TOKEN}


def test_a_teams_grant_names_the_admin_kubeconfigs_current_context(monkeypatch, capsys):
    """grant-team.sh sets managementServer and managementCa from the owner's admin kubeconfig: its
    current context's cluster, whatever else the file holds."""
    for show, expected in (("server", "https://lab:6443"), ("ca", TENANT_CA)):
        monkeypatch.setattr("sys.stdin", io.StringIO(MULTI))
        assert team_token.main(["--show", show]) == 0
        assert capsys.readouterr().out == expected


def _broken(change) -> str:
    doc = copy.deepcopy(yaml.safe_load(MULTI))
    change(doc)
    return yaml.safe_dump(doc)


BROKEN = {
    "no current-context": (_broken(lambda d: d.pop("current-context")), "has no current-context"),
    "unknown context": (
        _broken(lambda d: d.update({"current-context": "prod"})),
        "current-context 'prod' is not one of its contexts",
    ),
    "unknown cluster": (
        _broken(lambda d: d["contexts"][1]["context"].update(cluster="prod")),
        "context 'lab' names cluster 'prod', which is not one of its clusters",
    ),
    "unknown user": (
        _broken(lambda d: d["contexts"][1]["context"].update(user="prod-admin")),
        "context 'lab' names user 'prod-admin', which is not one of its users",
    ),
    "not a mapping": ("- a\n- list\n", "not a YAML mapping"),
    "not YAML": ("clusters: [\n", "not YAML"),
}
READERS = {
    "cluster_server": kube.cluster_server,
    "cluster_ca": kube.cluster_ca,
    "kubeconfig_ca_hash": kubeconfig_ca_hash,
    "endpoint_kubeconfig": lambda k: kube.endpoint_kubeconfig(k, "https://x:6443"),
    "api_client": kube.api_client,
    "TokenKeeper": lambda k: bt.TokenKeeper(k, Path("/nonexistent/token")),
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
@pytest.mark.parametrize(("kubeconfig", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_a_kubeconfig_without_a_usable_current_context_is_one_plain_error(reader, kubeconfig, message):
    with pytest.raises(KubeconfigError, match=message) as err:
        reader(kubeconfig)
    assert "\n" not in str(err.value)


def test_a_cluster_without_a_ca_or_a_user_without_a_token_is_named():
    no_ca = _broken(lambda d: d["clusters"][1]["cluster"].pop("certificate-authority-data"))
    with pytest.raises(KubeconfigError, match="cluster 'lab' \\(context 'lab'\\) has no certificate-authority-data"):
        kube.cluster_ca(no_ca)
    no_token = _broken(lambda d: d["users"][1].update(user={"tokenFile": "/t"}))
    with pytest.raises(KubeconfigError, match="user 'lab-keeper' \\(context 'lab'\\) has no token"):
        bt.TokenKeeper(no_token, Path("/nonexistent/token"))


def test_the_keeper_command_says_what_is_wrong_with_its_kubeconfig_in_one_line(tmp_path, caplog, monkeypatch):
    def started(*_args):
        raise AssertionError("the keeper started on a kubeconfig it cannot use")

    monkeypatch.setattr(bt.TokenKeeper, "run", started)
    config = tmp_path / "kubeconfig"
    config.write_text(BROKEN["unknown context"][0])
    assert bt.main(["--kubeconfig", str(config), "--token-file", str(tmp_path / "token")]) == 2
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "current-context 'prod' is not one of its contexts" in record.getMessage() and record.exc_info is None
    assert bt.main(["--kubeconfig", str(tmp_path / "nope"), "--token-file", str(tmp_path / "token")]) == 2
