"""A worker from the lab's node image joins a real control plane through the project's own join,
runs a pod on the CNI the image brings, keeps its fake cards through kubelet restarts and status
updates, is removed Node and all without touching another, and a bad join says why in one line."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from kubernetes import client

from components.config.model import GpuFleet
from components.config.versions import DEFAULT_TENANT_VERSION as VERSION
from components.domain.hami_annotations import NODE_REGISTER, RES_GPU
from components.domain.inventory import gpu_capacity
from components.lifecycle.bootstrap_token import (
    create_token,
    join_configuration,
    kubeconfig_ca_hash,
    token_id,
    token_secret_name,
)
from components.nodes.node_container import NodeContainer
from components.providers.node_gpu_capacity import NodeGpuCapacityProvider
from components.providers.node_membership import NodeMembershipProvider
from components.tenant.gpu_inventory import fake_cards_metadata
from tests.support.docker_lab import BUSYBOX, NODE_MEMORY_MIB, docker, read_tunables
from tests.support.lab_join import STATUS_REPORT_SECONDS, join_worker, node_ready, run_join
from tests.support.waits import settles

pytestmark = pytest.mark.docker

A100 = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 2})


@pytest.fixture(scope="module")
def core(control_plane):
    return control_plane.core()


@pytest.fixture(scope="module")
def first(control_plane, lab, image, core):
    node = lab.start_node("w1", image)
    joined = join_worker(control_plane, lab, node)
    assert settles(lambda: node_ready(core, node), timeout=120, interval=1), f"{node} not Ready"
    return joined


@pytest.fixture(scope="module")
def second(control_plane, lab, image, core, first):
    node = lab.start_node("w2", image)
    joined = join_worker(control_plane, lab, node)
    assert settles(lambda: node_ready(core, node), timeout=120, interval=1), f"{node} not Ready"
    return joined


def test_the_node_container_is_what_worker_node_runs():
    """One description of a node container: the test's `docker run` and WorkerNode's share it."""
    args = NodeContainer(name="n", image="img", memory_mib=512).docker_run_args("net")
    assert (
        "--privileged" in args
        and ["--cgroupns", "private"] == args[args.index("--cgroupns") : args.index("--cgroupns") + 2]
    )
    assert args[args.index("/var") - 1] == "--volume" and "/lib/modules:/lib/modules:ro" in args and args[-1] == "img"
    assert ["--memory", "512m"] == args[args.index("--memory") : args.index("--memory") + 2]


def test_worker_joins_is_ready_at_the_pinned_version_and_its_token_is_revoked(first, core, control_plane, tunables):
    node = core.read_node(first.node)
    assert node.status.node_info.kubelet_version == VERSION
    assert node.status.node_info.machine_id == first.machine_id
    assert node.spec.pod_cidr and node.spec.pod_cidr.startswith("10.244.")
    # NodeMembership revoked the join's token once the Node was there.
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_secret(token_secret_name(first.membership["token_id"]), "kube-system")
    assert gone.value.status == 404
    # Every lab container runs under its memory cap.
    assert docker("inspect", "--format", "{{.HostConfig.Memory}}", first.node) == str(NODE_MEMORY_MIB * 1024 * 1024)


def test_kernel_tunables_are_put_back_after_each_kubelet_start(first, lab, tunables):
    """A kubelet start rewrites kernel.panic and friends on the host; the guard puts them back."""
    before = read_tunables()
    count = len(tunables.restored)
    lab.exec(first.node, "systemctl", "restart", "kubelet")
    assert settles(lambda: len(tunables.restored) > count, timeout=60, interval=0.5), (
        "no kubelet start was seen rewriting the tunables: " + "\n".join(tunables.lines)
    )
    time.sleep(2)
    assert read_tunables() == before


def _serve(core, name: str, node: str) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "web",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": [
                        "sh",
                        "-c",
                        f"mkdir -p /www && echo {name} > /www/index.html && httpd -f -p 8080 -h /www",
                    ],
                    "ports": [{"containerPort": 8080}],
                }
            ],
        },
    }
    core.create_namespaced_pod("default", body)

    def running() -> str:
        pod = core.read_namespaced_pod(name, "default")
        return pod.status.pod_ip if pod.status.phase == "Running" else ""

    assert settles(running, timeout=120, interval=1), core.read_namespaced_pod(name, "default").status
    return core.read_namespaced_pod(name, "default").status.pod_ip


def test_a_pod_gets_an_ip_from_the_node_cni_and_answers_on_its_port(first, core, lab):
    ip = _serve(core, "web-1", first.node)
    assert ip.startswith(core.read_node(first.node).spec.pod_cidr.rsplit(".", 2)[0])
    assert lab.exec(first.node, "curl", "-sS", f"http://{ip}:8080/") == "web-1"


def test_fake_cards_stay_through_a_kubelet_restart_and_three_status_updates(first, core, control_plane, lab):
    labels, annotations = fake_cards_metadata("team-a", first.node, A100)
    core.patch_node(first.node, {"metadata": {"labels": labels, "annotations": annotations}})
    props = {"kubeconfig": control_plane.kubeconfig_text, "node": first.node, "count": gpu_capacity(A100)}
    NodeGpuCapacityProvider().create(props)
    lab.exec(first.node, "systemctl", "restart", "kubelet")
    beats: list[str] = []

    def three_updates() -> bool:
        node = core.read_node(first.node)
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        if ready.status == "True" and (not beats or beats[-1] != str(ready.last_heartbeat_time)):
            beats.append(str(ready.last_heartbeat_time))
        return len(beats) >= 4  # the first after the restart, then three more

    assert settles(three_updates, timeout=STATUS_REPORT_SECONDS * 15, interval=1), beats
    node = core.read_node(first.node)
    assert node.metadata.annotations[NODE_REGISTER] == annotations[NODE_REGISTER]
    assert node.status.capacity[RES_GPU] == str(gpu_capacity(A100))
    assert node.status.allocatable[RES_GPU] == str(gpu_capacity(A100))


def test_a_second_worker_joins_and_pods_reach_across_nodes(first, second, core, lab):
    assert node_ready(core, first.node) and node_ready(core, second.node)
    ip = _serve(core, "web-2", second.node)
    # From the first node to a pod on the second: the routes the node image keeps between nodes.
    assert settles(
        lambda: lab.exec(first.node, "curl", "-sS", "-m", "2", f"http://{ip}:8080/", check=False) == "web-2",
        timeout=30,
    )


def test_each_node_has_a_machine_id_of_its_own_kept_across_a_container_restart(first, second, core, lab, image):
    """The stack tells a replaced worker from the one before it by the Node's machine ID (its
    membership, capacity and labels are keyed on it): the image carries none, two nodes from it
    differ, and a node keeps its own through `docker restart` while a node made again gets a new one."""
    carried = "wc -c </etc/machine-id; readlink /var/lib/dbus/machine-id"
    bare = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", carried)
    assert bare.split() == ["0", "/etc/machine-id"], bare
    ids = {first.machine_id, second.machine_id}
    assert len(ids) == 2 and all(re.fullmatch("[0-9a-f]{32}", i) for i in ids), ids
    assert core.read_node(second.node).status.node_info.machine_id == second.machine_id

    def machine_id(node: str) -> str:
        def read() -> str:
            return lab.exec(node, "cat", "/etc/machine-id", check=False).strip()

        assert settles(read, timeout=60, interval=1), f"{node} made no machine ID"
        return read()

    # A node that never joins (no kubelet config: no kubelet start rewrites the host's tunables).
    spare = lab.start_node("w3", image)
    try:
        before = machine_id(spare)
        assert before and before not in ids
        docker("restart", lab.containers[spare], timeout=120)
        assert machine_id(spare) == before
    finally:
        lab.remove(spare)
    again = lab.start_node("w3", image)
    try:
        assert machine_id(again) not in {*ids, before}
    finally:
        lab.remove(again)


def test_removing_a_worker_removes_only_its_own_node(first, second, core, lab):
    lab.remove(second.node)
    NodeMembershipProvider().delete(f"{second.node}/{second.machine_id}", second.membership)
    names = {n.metadata.name for n in core.list_node().items}
    assert second.node not in names and first.node in names


@pytest.fixture(scope="module")
def stranger(lab, image):
    return lab.start_node(f"w3-{uuid.uuid4().hex[:4]}", image)


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_a_join_with_a_wrong_ca_pin_fails_in_one_line(control_plane, lab, stranger):
    token, _ = create_token(control_plane.core(), token_id(f"{stranger}/pin"), 300, "test")
    config = join_configuration(control_plane.endpoint, token, "sha256:" + "0" * 64, stranger)
    proc = run_join(stranger, config)
    assert proc.returncode == 1
    assert _last_line(proc.stderr) == (
        f"error: {stranger} did not join its tenant: the tenant's CA is not the one pinned (caCertHashes); "
        "the tenant was made again since the pin was read"
    )


def test_a_join_with_a_lapsed_token_fails_in_one_line(control_plane, lab, stranger):
    core = control_plane.core()
    tid = token_id(f"{stranger}/lapsed")
    token, _ = create_token(core, tid, 1, "test")

    def cleaned() -> bool:
        try:
            core.read_namespaced_secret(token_secret_name(tid), "kube-system")
            return False
        except client.ApiException as exc:
            return exc.status == 404

    assert settles(cleaned, timeout=60, interval=1), "the tokencleaner kept the lapsed token"
    config = join_configuration(
        control_plane.endpoint,
        token,
        kubeconfig_ca_hash(control_plane.kubeconfig_text),
        stranger,
        discovery_timeout_seconds=15,
    )
    proc = run_join(stranger, config)
    assert proc.returncode == 1
    assert _last_line(proc.stderr) == (
        f"error: {stranger} did not join its tenant: its bootstrap token is not valid in the tenant "
        "(lapsed or revoked); the next pulumi up makes a fresh one"
    )


def test_the_node_image_carries_kubeadm_and_kubectl_of_its_version(first, lab):
    assert lab.exec(first.node, "kubeadm", "version", "-o", "short") == VERSION
    assert f"Client Version: {VERSION}" in lab.exec(first.node, "kubectl", "version", "--client")
