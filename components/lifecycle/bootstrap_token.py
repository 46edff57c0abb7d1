"""Joining a node to a tenant: short-lived bootstrap tokens and CA pinning (the Node a worker
registers: components.lifecycle.node_membership).

- A token is a Secret `bootstrap-token-<id>` with an `expiration` (kube-controller-manager's
  tokencleaner deletes it then); the program also deletes it as soon as its join is done.
- The join pins the tenant CA (`sha256:` of its SubjectPublicKeyInfo, what kubeadm checks) instead
  of skipping verification, and takes the token from a JoinConfiguration file, never an argument.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import string
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from components.config.model import KUBEADM_DISCOVERY_SECONDS
from components.kube.bound_token import seconds_left
from components.kube.client import cluster_ca, get_json, get_json_or_none, http_status, send

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
NODES_GROUP = "system:nodes"
# What the lab's node image reads to route pods between nodes: every Node's pod CIDR and address.
# Since Kubernetes 1.32 the Node authorizer lets a kubelet read only its own Node; this role gives
# the tenant's nodes read access to the others (what kindnet's own ServiceAccount has on kind).
NODE_NETWORK_ROLE = "gpu-tenancy:node-network"
NODE_NETWORK_RULES = ({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},)
# The tenant's RBAC for docker workers (tokens are per worker): binding name suffix ->
# (ClusterRole, group). kubeadm's own roles: join with a token, client certificates approved.
NODE_BOOTSTRAP_BINDINGS = {
    "node-bootstrapper": ("system:node-bootstrapper", BOOTSTRAP_GROUP),
    "node-autoapprove-bootstrap": ("system:certificates.k8s.io:certificatesigningrequests:nodeclient", BOOTSTRAP_GROUP),
    "node-autoapprove-certificate-rotation": (
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        NODES_GROUP,
    ),
    "node-network": (NODE_NETWORK_ROLE, NODES_GROUP),
}
TOKEN_NAMESPACE = "kube-system"
_ALPHABET = string.ascii_lowercase + string.digits


def token_id(seed: str) -> str:
    """The public half of a token: 6 characters [a-z0-9], stable for one seed (one worker)."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:6])


def token_secret_name(tid: str) -> str:
    return f"bootstrap-token-{tid}"


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's --discovery-token-ca-cert-hash: SHA-256 of the CA's DER SubjectPublicKeyInfo."""
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def kubeconfig_ca_hash(kubeconfig: str) -> str:
    """The CA pin of the cluster the kubeconfig's current context names (what workers join)."""
    return ca_cert_hash(base64.b64decode(cluster_ca(kubeconfig)))


def create_token(core: CoreV1Api, tid: str, ttl_seconds: int, description: str) -> tuple[str, str]:
    """Create `bootstrap-token-<tid>` expiring after `ttl_seconds`; returns (token, expiration)."""
    secret = "".join(secrets.choice(_ALPHABET) for _ in range(16))
    expiration = (datetime.now(UTC) + timedelta(seconds=ttl_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token_secret_name(tid), "namespace": TOKEN_NAMESPACE},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": tid,
            "token-secret": secret,
            "expiration": expiration,
            "description": description,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": BOOTSTRAP_GROUP,
        },
    }
    try:
        send(core.create_namespaced_secret, TOKEN_NAMESPACE, body)
    except Exception as exc:
        if http_status(exc) != 409:
            raise
        # A token of this id from an interrupted run: replace it, its secret is unknown to us.
        send(core.replace_namespaced_secret, token_secret_name(tid), TOKEN_NAMESPACE, body)
    return f"{tid}.{secret}", expiration


def held_token(core: CoreV1Api, tid: str, token: str) -> dict[str, Any] | None:
    """The Secret of token `<id>.<secret>` while it still holds that very token, else None
    (revoked, cleaned up after its expiry, or a successor made under the same id)."""
    found = get_json_or_none(core.read_namespaced_secret, token_secret_name(tid), TOKEN_NAMESPACE)
    if found is None:
        return None
    held = base64.b64decode((found.get("data") or {}).get("token-secret", "")).decode()
    return found if f"{tid}.{held}" == token else None


def delete_token(core: CoreV1Api, tid: str, token: str | None = None) -> bool:
    """Revoke the token now; False when it was already gone (expired and cleaned up).

    With `token` (`<id>.<secret>`), only while the Secret still holds that token: a successor
    made under the same id (a replaced pool's token) is never revoked by its predecessor.
    """
    name = token_secret_name(tid)
    preconditions = None
    if token is not None:
        found = held_token(core, tid, token)
        if found is None:
            return False
        meta = found["metadata"]
        preconditions = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    try:
        send(
            core.delete_namespaced_secret,
            name,
            TOKEN_NAMESPACE,
            body={"preconditions": preconditions} if preconditions else None,
        )
        return True
    except Exception as exc:
        if http_status(exc) == 404:
            return False
        if http_status(exc) == 409 and preconditions:
            return False  # changed since it was read: no longer this token
        raise


def join_configuration(
    endpoint: str,
    token: str,
    ca_hash: str,
    node_name: str,
    discovery_timeout_seconds: int = KUBEADM_DISCOVERY_SECONDS,
) -> str:
    """kubeadm's JoinConfiguration: token and CA pin in a file, preflight skipped (in a container)."""
    return yaml.safe_dump(
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "JoinConfiguration",
            "discovery": {
                "bootstrapToken": {"apiServerEndpoint": endpoint, "token": token, "caCertHashes": [ca_hash]},
            },
            "nodeRegistration": {"name": node_name},
            "skipPhases": ["preflight"],
            "timeouts": {"discovery": f"{discovery_timeout_seconds}s"},
        },
        sort_keys=False,
    )


def machine_join(endpoint: str, token: str, ca_hash: str, labels: dict[str, str]) -> dict[str, str]:
    """How a team joins its own machines: a JoinConfiguration (`kubeadm join --config`), the CA
    pinned and the node's labels set. Only this form is given: the token stays in a file, off the
    machine's process list and shell history, and the labels are there from the first heartbeat."""
    node_labels = label_selector(labels)
    configuration = yaml.safe_dump(
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "JoinConfiguration",
            "discovery": {
                "bootstrapToken": {"apiServerEndpoint": endpoint, "token": token, "caCertHashes": [ca_hash]},
            },
            "nodeRegistration": {"kubeletExtraArgs": [{"name": "node-labels", "value": node_labels}]},
        },
        sort_keys=False,
    )
    return {"configuration": configuration, "labels": node_labels}


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


# The label every kubelet puts on its Node: a docker worker's hostname is its Node's name.
HOSTNAME_LABEL = "kubernetes.io/hostname"


def worker_joins(node: str) -> dict[str, Any]:
    """What a docker worker's token expects: one machine, its own Node. While that Node is
    missing the token is renewed once it lapses, so a failed join heals with the next `up`; when
    the tenant cannot be asked the token is kept (a joined worker is never sent to join again)."""
    return {"labels": {HOSTNAME_LABEL: node}, "expected": 1, "keep_when_unknown": True}


def joined_nodes(core: CoreV1Api, labels: dict[str, str]) -> int:
    """How many Nodes carry the pool's labels: the machines that have joined with its token."""
    found = get_json(core.list_node, label_selector=label_selector(labels))
    return len(found.get("items") or [])


# A pool's join token is renewed by `up` once less than this share of its life is left, so the
# join the stack outputs is never about to lapse while machines are still to join.
JOIN_RENEW_SHARE = 0.25
KEEP, RENEW, REVOKE = "keep", "renew", "revoke"


def join_token_verdict(
    expiration: str | None, ttl_seconds: int, revoked: bool, joined: int | None, expected: int, now: float
) -> str:
    """What `up` does with a pool's join token: REVOKE it once every expected machine is a Node;
    RENEW it (a fresh token) while machines are still to join and it is revoked, expired or in the
    last JOIN_RENEW_SHARE of its life; otherwise KEEP. `joined` is None when the tenant could not
    be asked: then time alone decides and nothing is revoked."""
    if joined is not None and joined >= expected:
        return KEEP if revoked else REVOKE
    if revoked or not expiration:
        return RENEW
    return RENEW if seconds_left(expiration, now) < ttl_seconds * JOIN_RENEW_SHARE else KEEP
