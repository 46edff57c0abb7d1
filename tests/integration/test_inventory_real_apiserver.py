"""`pulumi up`, a second `up`, and `destroy` of the project's inventory component, run by the
real Pulumi engine with the real kubernetes provider against a real kube-apiserver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.domain import hami_annotations as ha
from tests.support.cluster import TOKEN, add_node

PROGRAM = Path(__file__).parent / "programs" / "inventory"
NODES = ["inv-node-0", "inv-node-1"]

pytestmark = pytest.mark.integration


@pytest.fixture
def stack(pulumi_cli, cluster, tmp_path):
    for n in NODES:
        add_node(cluster, n)
    work = tmp_path / "program"
    work.mkdir()
    for f in PROGRAM.iterdir():
        (work / f.name).write_text(f.read_text())
    pulumi_cli("stack", "init", "test", cwd=work)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=work)
    pulumi_cli("config", "set", "tenant", "team-b", cwd=work)
    pulumi_cli("config", "set", "model", "L4", cwd=work)
    pulumi_cli("config", "set", "cardsPerNode", "2", cwd=work)
    pulumi_cli("config", "set", "--path", "nodes[0]", NODES[0], cwd=work)
    pulumi_cli("config", "set", "--path", "nodes[1]", NODES[1], cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", cwd=work, check=False)
    core = cluster.core()
    for n in NODES:
        core.delete_node(n)


def test_up_second_up_destroy(pulumi_cli, cluster, stack):
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    # stack, provider, component, and per node a NodePatch and a NodeGpuCapacity
    assert "7 created" in up.stdout, up.stdout
    core = cluster.core()
    for n in NODES:
        node = core.read_node(n)
        assert node.metadata.labels["gpu"] == "on"
        devices = ha.decode_node_register(node.metadata.annotations[ha.NODE_REGISTER])
        assert [(d.devmem, d.devcore, d.count, d.type) for d in devices] == [(23034, 100, 10, "NVIDIA L4")] * 2
        assert node.status.capacity[ha.RES_GPU] == "20"
        assert node.status.allocatable[ha.RES_GPU] == "20"
        # the status seed did not disturb what the "kubelet" had reported
        assert node.status.capacity["cpu"] == "8"

    outputs = json.loads(pulumi_cli("stack", "output", "--json", cwd=stack).stdout)
    assert outputs["inventory"] == {
        "model": "NVIDIA L4 24GB",
        "cards": 4,
        "memoryMb": 92136,
        "coresPercent": 400,
        "pools": {"inv": {"model": "NVIDIA L4 24GB", "nodes": 2, "cardsPerNode": 2}},
    }

    state = json.loads(pulumi_cli("stack", "export", cwd=stack).stdout)
    assert TOKEN not in json.dumps(state), "the kubeconfig's token is in the state in clear text"

    again = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert "created" not in again.stdout and "updated" not in again.stdout, again.stdout
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)

    pulumi_cli("destroy", "--yes", cwd=stack)
    for n in NODES:
        node = core.read_node(n)
        assert ha.NODE_REGISTER not in (node.metadata.annotations or {})
        assert "gpu" not in (node.metadata.labels or {})
        assert ha.RES_GPU not in (node.status.capacity or {})
        assert ha.RES_GPU not in (node.status.allocatable or {})
