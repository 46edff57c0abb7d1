"""Worker join material and clean-up against a real kube-apiserver, with kube-controller-manager's
tokencleaner: tokens expire and go, joins pin the CA as kubeadm computes it, and a replaced
worker's clean-up never removes its successor's Node."""

from __future__ import annotations

import subprocess
import uuid

import pytest
import yaml
from kubernetes import client

from components.lifecycle import bootstrap_token as bs
from components.lifecycle import node_membership as nm
from tests.support.waits import settles

pytestmark = pytest.mark.integration


def secret_exists(core, tid: str) -> bool:
    try:
        core.read_namespaced_secret(bs.token_secret_name(tid), bs.TOKEN_NAMESPACE)
        return True
    except client.ApiException as exc:
        assert exc.status == 404
        return False


def test_token_expires_and_the_tokencleaner_removes_it(with_tokencleaner):
    core = with_tokencleaner.core()
    tid = bs.token_id(f"expiring/{uuid.uuid4()}")
    token, expiration = bs.create_token(core, tid, ttl_seconds=2, description="test")
    assert token.startswith(f"{tid}.") and len(token) == 23
    secret = core.read_namespaced_secret(bs.token_secret_name(tid), bs.TOKEN_NAMESPACE)
    assert secret.type == "bootstrap.kubernetes.io/token" and "expiration" in secret.data
    settles(lambda: not secret_exists(core, tid), timeout=90, interval=1)
    assert not secret_exists(core, tid), "kube-controller-manager's tokencleaner kept an expired token"


def test_token_is_revoked_once_the_join_is_done(with_tokencleaner):
    core = with_tokencleaner.core()
    tid = bs.token_id(f"revoked/{uuid.uuid4()}")
    bs.create_token(core, tid, ttl_seconds=900, description="test")
    assert bs.delete_token(core, tid) is True
    assert not secret_exists(core, tid)
    assert bs.delete_token(core, tid) is False  # already gone: not an error


def test_ca_pin_is_what_kubeadm_computes(with_tokencleaner):
    """kubeadm's documented recipe: SHA-256 of the CA public key in DER."""
    crt = with_tokencleaner.workdir / "ca.crt"
    pubkey = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", str(crt)], capture_output=True, check=True)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pubkey.stdout, capture_output=True)
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-hex"], input=der.stdout, capture_output=True)
    assert bs.ca_cert_hash(crt.read_bytes()) == "sha256:" + digest.stdout.decode().split()[-1]
    assert bs.kubeconfig_ca_hash(with_tokencleaner.kubeconfig_text) == bs.ca_cert_hash(crt.read_bytes())


def test_join_configuration_carries_the_token_and_the_pin_not_skip_verification():
    doc = yaml.safe_load(bs.join_configuration("172.30.0.2:31443", "abcdef.0123456789abcdef", "sha256:00", "n1"))
    token = doc["discovery"]["bootstrapToken"]
    assert token == {
        "apiServerEndpoint": "172.30.0.2:31443",
        "token": "abcdef.0123456789abcdef",
        "caCertHashes": ["sha256:00"],
    }
    assert "unsafeSkipCAVerification" not in token and doc["skipPhases"] == ["preflight"]


def register(core, name: str, machine: str) -> None:
    """What a kubelet does: the Node, with the container's machine ID in its status."""
    try:
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
    except client.ApiException as exc:
        if exc.status != 409:  # re-registering under the same name takes the existing Node over
            raise
    core.patch_node_status(name, {"status": {"nodeInfo": {"machineID": machine}}})


def test_a_replaced_workers_clean_up_leaves_its_successor(with_tokencleaner):
    core = with_tokencleaner.core()
    name = f"worker-{uuid.uuid4().hex[:6]}"
    register(core, name, "old-container")
    assert nm.wait_for_node(core, name, "old-container", timeout=5, interval=0.2)
    register(core, name, "new-container")  # the successor registered under the same name
    assert nm.delete_node_if_mine(core, name, "old-container") == "successor"
    assert core.read_node(name).status.node_info.machine_id == "new-container"
    assert nm.delete_node_if_mine(core, name, "new-container") == "deleted"
    assert nm.delete_node_if_mine(core, name, "new-container") == "absent"


def test_a_node_that_never_registers_is_named(with_tokencleaner):
    with pytest.raises(nm.NodeNotRegisteredError, match="no Node after 1 s"):
        nm.wait_for_node(with_tokencleaner.core(), "never-registers", "m", timeout=1, interval=0.2)
