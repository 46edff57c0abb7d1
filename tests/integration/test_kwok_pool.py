"""A kwok pool on the real API server with KWOK itself: the real Pulumi engine makes the pool's
simulated nodes with the project's inventory; KWOK (on its least-privilege ServiceAccount) makes
them Ready; kube-controller-manager and kube-scheduler put a GPU Deployment's pods on them and
KWOK makes the pods Running. Then the pool grows, shrinks, is repaired after drift and is
destroyed without leaving a node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.config.model import GpuFleet
from components.domain import hami_annotations as ha
from components.domain.inventory import advertised_resources, node_devices
from components.domain.names import MOCK_GPU_NODE_LABEL, POOL_MODE_LABEL
from components.lifecycle.simulated_nodes import selector
from tests.support.cluster import TOKEN, start_cluster
from tests.support.kwok import start_kwok, wait_for
from tests.support.tools import require

PROGRAM = Path(__file__).parent / "programs" / "kwok_pool"
FLEET = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 2})
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kwok_cluster(tools):
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager", "kube-scheduler", "kwok")
    cluster = start_cluster(tools)
    cluster.start_controller_manager(["nodelifecycle", "deployment", "replicaset", "garbagecollector", "podgc"])
    cluster.start_scheduler()
    start_kwok(cluster)
    yield cluster
    cluster.stop()


@pytest.fixture
def stack(pulumi_cli, kwok_cluster, tmp_path):
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", kwok_cluster.kubeconfig_text)
    for key, value in {"tenant": "team-a", "model": "A100-80GB", "cardsPerNode": "2", "nodes": "3"}.items():
        pulumi_cli("config", "set", key, value, cwd=work)
    pulumi_cli("config", "set", "replicas", "6", cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", cwd=work, check=False)


def names(n: int) -> list[str]:
    return [f"lab-team-a-sim-{i}" for i in range(n)]


def pool_nodes(core) -> list[str]:
    return sorted(n.metadata.name for n in core.list_node(label_selector=selector("team-a", "sim")).items)


def ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_kwok_pool_nodes_ready_with_inventory_and_gpu_pods_running(pulumi_cli, kwok_cluster, stack):
    core = kwok_cluster.core()
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert "4 created" in up.stdout, up.stdout  # stack, SimulatedNodes, provider, Deployment

    assert pool_nodes(core) == names(3)
    for name in names(3):
        node = wait_for(lambda n=name: (lambda o: o if ready(o) else None)(core.read_node(n)), 60, f"{name} Ready")
        labels = node.metadata.labels
        assert labels[MOCK_GPU_NODE_LABEL[0]] == MOCK_GPU_NODE_LABEL[1] and labels["gpu"] == "on"
        assert labels[POOL_MODE_LABEL] == "kwok" and "kubernetes.io/os" not in labels
        assert not node.spec.taints  # no toleration needed: the node-lifecycle controller lifted not-ready
        devices = ha.decode_node_register(node.metadata.annotations[ha.NODE_REGISTER])
        assert devices == node_devices("team-a", name, FLEET)
        for res, value in advertised_resources(FLEET).items():
            assert node.status.allocatable[res] == value, res

    # `up` awaited the Deployment: its pods were scheduled onto the simulated nodes and run.
    pods = core.list_namespaced_pod("default", label_selector="app=gpu-slices").items
    assert len(pods) == 6
    assert all(p.status.phase == "Running" and p.spec.node_name in names(3) and p.status.pod_ip for p in pods)
    # 6 x 20000 MB on 3 nodes of 2 x 81920 MB: the scheduler spread them; none overbooked a node.
    per_node = {n: sum(1 for p in pods if p.spec.node_name == n) for n in names(3)}
    assert max(per_node.values()) * 20000 <= 2 * 81920

    state = json.loads(pulumi_cli("stack", "export", cwd=stack).stdout)
    assert TOKEN not in json.dumps(state), "the kubeconfig's token is in the state in clear text"
    again = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert "created" not in again.stdout and "updated" not in again.stdout, again.stdout

    # Grow, then shrink: only the difference is made or removed.
    pulumi_cli("config", "set", "nodes", "5", cwd=stack)
    uid_0 = core.read_node(names(1)[0]).metadata.uid
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert pool_nodes(core) == names(5)
    assert core.read_node(names(1)[0]).metadata.uid == uid_0, "an existing node was made again"
    wait_for(lambda: all(ready(core.read_node(n)) for n in names(5)), 60, "the new nodes Ready")
    pulumi_cli("config", "set", "nodes", "2", cwd=stack)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert pool_nodes(core) == names(2)

    # Drift: a node deleted by hand is made again by `up --refresh`.
    core.delete_node(names(2)[1])
    pulumi_cli("up", "--yes", "--skip-preview", "--refresh", cwd=stack)
    assert pool_nodes(core) == names(2)
    wait_for(lambda: ready(core.read_node(names(2)[1])), 60, "the re-made node Ready")

    pulumi_cli("destroy", "--yes", cwd=stack)
    assert pool_nodes(core) == []
    assert not [n for n in core.list_node().items if n.metadata.name.startswith("lab-team-a-")]
