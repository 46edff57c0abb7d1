"""The mock-GPU label on a real kube-apiserver with NodeRestriction: a kubelet's identity
(system:node:<name>) cannot put it on its own Node, neither registering nor patching, so a
machine of an external pool cannot call its real cards fake and have their locks freed; the
identities that write it (the stack's automation identity, KWOK-pool writers) still can."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from components.domain.names import MOCK_GPU_NODE_LABEL
from tests.support import cluster as tc
from tests.support.tools import require

pytestmark = pytest.mark.integration
MOCK = {MOCK_GPU_NODE_LABEL[0]: MOCK_GPU_NODE_LABEL[1]}


@pytest.fixture(scope="module")
def restricted(tools: dict[str, str]) -> Iterator[tc.TestCluster]:
    """A cluster of its own whose API server runs NodeRestriction (and the Node authorizer, as
    kubeadm's and Kamaji's do, so a kubelet may write its own Node at all)."""
    require(tools, "kube-apiserver", "etcd", "openssl")
    c = tc.start_cluster(
        tools, api_args=["--enable-admission-plugins=NodeRestriction", "--authorization-mode=Node,RBAC"]
    )
    yield c
    c.stop()


def kubelet(cluster: tc.TestCluster, node: str) -> Any:
    """CoreV1Api as the kubelet of `node` (a client certificate as TLS bootstrap issues one)."""
    crt, key = tc.signed_by(
        cluster.workdir,
        "ca",
        f"kubelet-{node}",
        f"/O=system:nodes/CN=system:node:{node}",
        "extendedKeyUsage=clientAuth",
    )
    config = client.Configuration()
    config.host = f"https://{cluster.endpoint}"
    config.ssl_ca_cert = str(cluster.workdir / "ca.crt")
    config.cert_file, config.key_file = str(crt), str(key)
    return client.CoreV1Api(client.ApiClient(config))


def refused(call: Any) -> str:
    with pytest.raises(client.ApiException) as err:
        call()
    assert err.value.status == 403, err.value.body
    return err.value.body


def test_a_kubelet_cannot_register_its_node_with_the_mock_label(restricted):
    node = f"ext-{uuid.uuid4().hex[:6]}"
    as_kubelet = kubelet(restricted, node)
    body = {"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, **MOCK}}}
    said = refused(lambda: as_kubelet.create_node(body))
    assert MOCK_GPU_NODE_LABEL[0] in said
    # the same kubelet registers without it (its other labels are its own to set)
    as_kubelet.create_node({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}})


def test_a_kubelet_cannot_label_its_own_node_mock_but_the_stack_can(restricted):
    node = f"ext-{uuid.uuid4().hex[:6]}"
    as_kubelet = kubelet(restricted, node)
    as_kubelet.create_node({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}})
    said = refused(lambda: as_kubelet.patch_node(node, {"metadata": {"labels": MOCK}}))
    assert MOCK_GPU_NODE_LABEL[0] in said
    # an identity that is not a kubelet (the stack's own, which labels docker workers) sets it
    restricted.core().patch_node(node, {"metadata": {"labels": MOCK}})
    assert restricted.core().read_node(node).metadata.labels[MOCK_GPU_NODE_LABEL[0]] == "true"
    # and the kubelet cannot take it off again either, nor change it
    refused(lambda: as_kubelet.patch_node(node, {"metadata": {"labels": {MOCK_GPU_NODE_LABEL[0]: None}}}))
    refused(lambda: as_kubelet.patch_node(node, {"metadata": {"labels": {MOCK_GPU_NODE_LABEL[0]: "false"}}}))


def test_a_label_outside_the_restricted_prefix_is_the_kubelets_to_set(restricted):
    """Why the label moved: under the old key the same kubelet labels itself mock unhindered."""
    node = f"ext-{uuid.uuid4().hex[:6]}"
    as_kubelet = kubelet(restricted, node)
    as_kubelet.create_node({"metadata": {"name": node, "labels": {"gpu-tenancy/mock-gpu": "true"}}})
    as_kubelet.patch_node(node, {"metadata": {"labels": {"gpu-tenancy/mock-gpu": "true", "x.example/y": "z"}}})


def test_a_kubelet_cannot_label_another_node_mock(restricted):
    mine, other = f"ext-{uuid.uuid4().hex[:6]}", f"sim-{uuid.uuid4().hex[:6]}"
    restricted.core().create_node({"metadata": {"name": other}})
    as_kubelet = kubelet(restricted, mine)
    refused(lambda: as_kubelet.patch_node(other, {"metadata": {"labels": MOCK}}))
