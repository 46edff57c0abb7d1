"""A tenant of the team's own machines only, on the Docker tier: before any machine joins, the gate
in front of HAMi says so at once; then a node container the test makes as a machine's owner would
(the lab's node image, nothing of the stack's) joins with the configuration the stack outputs for
its pool (ExternalPool's join, run as docs/worker-pools.md says: `kubeadm join --config`), becomes
Ready with its pool's labels from its first heartbeat, opens the gate, and HAMi's scheduler, placed
as the stack's chart values place it, runs there. HAMi's own images cannot be had here: its
scheduler's pod is the chart's placement with the lab's busybox in its place."""

from __future__ import annotations

import time

import pytest
import yaml

from components.config.model import HamiConfig
from components.config.versions import DEFAULT_TENANT_VERSION as VERSION
from components.domain.names import HAMI_NAMESPACE, POOL_LABEL, POOL_MODE_LABEL, TENANT_LABEL
from components.lifecycle.bootstrap_token import kubeconfig_ca_hash, token_id
from components.lifecycle.machines_joined import NoMachineJoinedError, wait_for_machine
from components.providers.bootstrap_token import BootstrapTokenProvider
from components.tenant.external_pool import external_labels, join_output
from components.tenant.hami import hami_values
from tests.support.docker_lab import BUSYBOX
from tests.support.lab_join import node_ready
from tests.support.waits import settles

pytestmark = pytest.mark.docker
TENANT, POOL = "team-b", "gpus"


@pytest.fixture(scope="module")
def core(control_plane):
    control_plane.start_scheduler()
    return control_plane.core()


@pytest.fixture(scope="module")
def join(control_plane):
    """The pool's join as `pulumi stack output <tenant> --show-secrets` gives it (pools.gpus.join)."""
    labels = external_labels(TENANT, POOL)
    kubeconfig = control_plane.kubeconfig_text
    token = (
        BootstrapTokenProvider()
        .create(
            {
                "kubeconfig": kubeconfig,
                "token_id": token_id(f"{TENANT}/{POOL}"),
                "ttl_seconds": 900,
                "description": f"gpu-tenancy: joins of pool {POOL} of {TENANT}",
                "joins": {"labels": labels, "expected": 1},
            }
        )
        .outs
    )
    return join_output(
        control_plane.endpoint, token["token"], kubeconfig_ca_hash(kubeconfig), token["expiration"], False, labels, 1
    )


def test_before_any_machine_joins_the_gate_says_so_at_once(core):
    started = time.monotonic()
    with pytest.raises(NoMachineJoinedError, match=r"no machine of its own has joined yet \(pool gpus: 0 of 1\)"):
        wait_for_machine(core, TENANT, {POOL: 1}, timeout=300)
    assert time.monotonic() - started < 10


@pytest.fixture(scope="module")
def machine(core, lab, image, join):
    """The owner's machine: started from the lab's node image, then the documented join on it."""
    node = lab.start_node("own-1", image)
    assert settles(
        lambda: lab.exec(node, "systemctl", "is-active", "containerd", check=False).strip() == "active",
        timeout=120,
        interval=2,
    ), f"containerd in {node} did not start"
    lab.exec(node, "sh", "-c", "umask 077; cat > /root/join.yaml", input=join["configuration"])
    # A container is not a machine kubeadm's preflight expects (no swap accounting, no kernel
    # modules of its own): its owner skips the checks, as the lab's own workers do.
    lab.exec(node, "kubeadm", "join", "--config", "/root/join.yaml", "--ignore-preflight-errors=all", timeout=600)
    lab.exec(node, "rm", "/root/join.yaml")

    def ready() -> bool:  # the Node appears once the kubelet's TLS bootstrap is through
        return node in {n.metadata.name for n in core.list_node().items} and node_ready(core, node)

    assert settles(ready, timeout=180, interval=2), f"{node} not Ready"
    return node


def test_the_machine_joins_with_its_pools_labels_and_opens_the_gate(core, machine, join):
    labels = core.read_node(machine).metadata.labels
    assert labels[TENANT_LABEL] == TENANT and labels[POOL_LABEL] == POOL and labels[POOL_MODE_LABEL] == "external"
    assert join["labels"] == yaml.safe_load(join["configuration"])["nodeRegistration"]["kubeletExtraArgs"][0]["value"]
    assert wait_for_machine(core, TENANT, {POOL: 1}, timeout=60) == [machine]


def scheduler_pod(name: str, selector: dict[str, str]) -> dict:
    return {
        "metadata": {"name": name, "namespace": HAMI_NAMESPACE},
        "spec": {
            "nodeSelector": selector,
            "containers": [
                {"name": "scheduler", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
            ],
        },
    }


def test_hamis_scheduler_runs_on_the_teams_machine(core, machine):
    core.create_namespace({"metadata": {"name": HAMI_NAMESPACE}})
    placed = hami_values(VERSION, HamiConfig(), real_gpus=True, system_pool_mode="external")["scheduler"]
    core.create_namespaced_pod(HAMI_NAMESPACE, scheduler_pod("hami-scheduler", placed["nodeSelector"]))
    # where a tenant with docker workers would put it: there is none here, so it cannot run
    docker_placed = hami_values(VERSION, HamiConfig())["scheduler"]["nodeSelector"]
    core.create_namespaced_pod(HAMI_NAMESPACE, scheduler_pod("on-docker-workers", docker_placed))

    def running() -> bool:
        pod = core.read_namespaced_pod("hami-scheduler", HAMI_NAMESPACE)
        return pod.status.phase == "Running" and pod.spec.node_name == machine

    assert settles(running, timeout=120, interval=2), core.read_namespaced_pod("hami-scheduler", HAMI_NAMESPACE).status
    stuck = core.read_namespaced_pod("on-docker-workers", HAMI_NAMESPACE)
    assert stuck.spec.node_name is None and stuck.status.phase == "Pending"
