"""The program's Kubernetes client against a real API server: writes whose answers the caller
drops keep using one connection (an unread answer would cost each request a new TLS handshake)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psutil

from components.kube.client import core_api, get_json, send

if TYPE_CHECKING:
    from tests.support.cluster import TestCluster


def connections_to(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port)


def test_writes_sent_and_dropped_reuse_one_connection(cluster: TestCluster, node: str):
    core = core_api(cluster.kubeconfig_text)
    port = int(cluster.endpoint.rsplit(":", 1)[1])
    before = connections_to(port)
    for i in range(30):
        send(core.patch_node, node, {"metadata": {"annotations": {"gpu-tenancy.test/n": str(i)}}})
    assert get_json(core.read_node, node)["metadata"]["annotations"]["gpu-tenancy.test/n"] == "29"
    opened = connections_to(port) - before
    assert opened <= 1, f"30 writes and a read opened {opened} connections"


def test_unread_answers_would_each_hold_a_connection(cluster: TestCluster, node: str):
    """What the test above guards against, shown on the same server: the client library keeps an
    unread answer's connection, so the next request opens another."""
    core = core_api(cluster.kubeconfig_text)
    port = int(cluster.endpoint.rsplit(":", 1)[1])
    before = connections_to(port)
    held = [core.read_node(node, _preload_content=False) for _ in range(5)]
    assert connections_to(port) - before >= 5
    for answer in held:
        answer.release_conn()
