"""The reference lab's eight checks, plus idempotence, on a live dev stack (Docker host only).

Fake cards give no runtime GPU isolation: what is checked is HAMi's accounting and scheduling,
the tenants' isolation and the release of HAMi's node lock, all on the real components.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from contextlib import suppress

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from components.domain.names import POOL_LABEL, TENANT_LABEL
from components.kube import hami_reasons
from components.kube.waiting import TimedOut, wait_until
from tests.support.gpu_pods import create_gpu_pod
from tests.support.waits import settles

pytestmark = pytest.mark.e2e
# GPU pods run only in namespaces holding a share of the tenant's budget: team-a's shared one.
NAMESPACE = "default"
PREFIX = f"acceptance-{uuid.uuid4().hex[:6]}"
IMAGE = {"ref": ""}  # the stack's workload image (workload_image), set once the module's fixture runs
SLEEP = ["sleep", "infinity"]


def node_names(core) -> set[str]:
    return {n.metadata.name for n in core.list_node().items}


def stack_nodes(core, tenant_name: str, tenant: dict) -> set[str]:
    """The nodes of a tenant's pools: those the stack made (docker, kwok: the `pools` output), and
    the team's own machines that joined an external pool (labelled with the tenant and the pool by
    the join the stack gave them)."""
    made = {n for pool in tenant["pools"].values() for n in pool.get("nodes", [])}
    external = [name for name, pool in tenant["pools"].items() if pool["mode"] == "external"]
    joined = {
        n.metadata.name
        for pool in external
        for n in core.list_node(label_selector=f"{TENANT_LABEL}={tenant_name},{POOL_LABEL}={pool}").items
    }
    return made | joined


def test_1_each_tenant_sees_only_its_own_nodes(outputs, team_a, team_b):
    assert node_names(team_a) == stack_nodes(team_a, "team-a", outputs["team-a"])
    assert node_names(team_b) == stack_nodes(team_b, "team-b", outputs["team-b"])
    assert not node_names(team_a) & node_names(team_b)


def test_2_each_tenant_sees_only_its_own_pods(team_a, team_b):
    uids_a = {p.metadata.uid for p in team_a.list_pod_for_all_namespaces().items}
    uids_b = {p.metadata.uid for p in team_b.list_pod_for_all_namespaces().items}
    assert uids_a and uids_b and not uids_a & uids_b
    nodes_a = node_names(team_a)
    assert all(p.spec.node_name in nodes_a for p in team_a.list_pod_for_all_namespaces().items if p.spec.node_name)


@pytest.mark.parametrize(
    ("tenant", "model", "memory"), [("team-a", "NVIDIA A100-SXM4-80GB", 81920), ("team-b", "NVIDIA L4", 23034)]
)
def test_3_each_tenant_sees_only_its_own_gpu_capacity(skip_own_cards, team_a, team_b, tenant, model, memory):
    skip_own_cards(tenant)
    core = {"team-a": team_a, "team-b": team_b}[tenant]
    for node in core.list_node().items:
        devices = ha.decode_node_register(node.metadata.annotations[ha.NODE_REGISTER])
        assert {(d.type, d.devmem) for d in devices} == {(model, memory)}
        assert int(node.status.allocatable.get(ha.RES_GPUMEM, "0")) == memory * len(devices)


@pytest.fixture(scope="module")
def gpu_namespace(team_a, workload_image):
    """team-a's shared namespace, where the stack's own `shared-a100` runs; the tier's pods are
    named PREFIX-* and deleted after. Nothing here releases HAMi's lock: the lab's release
    controller (one container per tenant) must do it, as for any team's pods."""
    IMAGE["ref"] = workload_image
    yield NAMESPACE
    for pod in team_a.list_namespaced_pod(NAMESPACE).items:
        if pod.metadata.name.startswith(PREFIX):
            team_a.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)


def gpu_pod(core, name: str, mem: int, cores: int) -> str:
    return create_gpu_pod(core, NAMESPACE, f"{PREFIX}-{name}", mem, cores, image=IMAGE["ref"], command=SLEEP)


def wait_scheduled(core, name: str, timeout: float = 120) -> client.V1Pod:
    def scheduled() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, NAMESPACE)
        return pod if pod.spec.node_name else None

    with suppress(TimedOut):
        return wait_until(scheduled, timeout=timeout, interval=1)
    raise AssertionError(
        f"{name} not scheduled in {timeout} s: {hami_reasons.pending_reason(core, NAMESPACE, name).text}"
    )


def wait_reason(core, name: str, text: str, timeout: float = 120) -> str:
    seen = {"reason": ""}

    def said() -> str:
        seen["reason"] = hami_reasons.pending_reason(core, NAMESPACE, name).text
        return seen["reason"] if text in seen["reason"] else ""

    with suppress(TimedOut):
        reason = wait_until(said, timeout=timeout, interval=2)
        assert not core.read_namespaced_pod(name, NAMESPACE).spec.node_name
        return reason
    raise AssertionError(f"{name}: expected {text}, got {seen['reason']!r}")


def test_4_gpu_pods_are_admitted_by_hamis_webhook(team_a, gpu_namespace):
    name = gpu_pod(team_a, "probe", 1000, 5)
    pod = team_a.read_namespaced_pod(name, NAMESPACE)
    assert pod.spec.scheduler_name == "hami-scheduler", (
        "HAMi's webhook was NOT reached (schedulerName stayed "
        f"{pod.spec.scheduler_name!r}): the tenant API server cannot reach it through Konnectivity, and GPU "
        "pods are being scheduled by the default scheduler without HAMi"
    )
    team_a.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def test_5_three_pods_share_one_card(team_a, gpu_namespace):
    """The stack's own `shared-a100` (3 x 20000 MB / 30 %): one A100, each released by the lab."""
    pods = [p for p in team_a.list_namespaced_pod(NAMESPACE).items if p.metadata.name.startswith("shared-a100-")]
    assert len(pods) == 3, [p.metadata.name for p in pods]
    devices = {ha.decode_pod_devices(p.metadata.annotations[ha.DEVICES_ALLOCATED])[0][0].uuid for p in pods}
    assert len(devices) == 1, devices
    for p in pods:
        assert p.metadata.annotations.get(ha.BIND_PHASE) == ha.PHASE_SUCCESS, p.metadata.name
        assert p.status.phase == "Running", (p.metadata.name, p.status.phase)


def test_6_a_fourth_30_percent_pod_stays_pending_with_card_insufficient_core(team_a, gpu_namespace):
    # inside the budget (which leaves room above the one card), above the card: HAMi refuses
    name = gpu_pod(team_a, "fourth", 20000, 30)
    wait_reason(team_a, name, "CardInsufficientCore")
    team_a.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)  # its share of the budget back


def test_7_90000_mb_stays_pending_with_card_insufficient_memory(team_a, gpu_namespace):
    name = gpu_pod(team_a, "too-big", 90000, 10)
    wait_reason(team_a, name, "CardInsufficientMemory")
    team_a.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def test_8_no_lock_is_left_behind(team_a, gpu_namespace):
    time.sleep(2)
    for node in team_a.list_node().items:
        lock = (node.metadata.annotations or {}).get(ha.NODE_LOCK)
        if lock:
            held = ha.decode_node_lock(lock)
            pod = team_a.read_namespaced_pod(held.pod, held.namespace)
            assert pod.metadata.annotations.get(ha.BIND_PHASE) != ha.PHASE_SUCCESS, f"stale lock {lock}"


def wait_bind_phase(core, name: str, phase: str, timeout: float = 30) -> None:
    def in_phase() -> bool:
        return (core.read_namespaced_pod(name, NAMESPACE).metadata.annotations or {}).get(ha.BIND_PHASE) == phase

    if settles(in_phase, timeout=timeout):
        return
    raise AssertionError(
        f"{name}: bind-phase is not {phase} after {timeout} s: the lab's release controller did not act"
    )


def test_9_a_pod_made_with_kubectl_after_up_binds_without_a_manual_step(outputs, team_a, gpu_namespace):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    manifest = f"""apiVersion: v1
kind: Pod
metadata: {{name: {PREFIX}-by-kubectl, namespace: {NAMESPACE}}}
spec:
  containers:
  - name: c
    image: {IMAGE["ref"]}
    command: [sleep, infinity]
    resources: {{limits: {{nvidia.com/gpumem: "1000", nvidia.com/gpucores: "5"}}}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig") as kc:  # 0600, removed on close
        os.chmod(kc.name, 0o600)
        kc.write(outputs["team-a"]["kubeconfig"])
        kc.flush()
        subprocess.run([kubectl, "--kubeconfig", kc.name, "apply", "-f", "-"], input=manifest, text=True, check=True)
    wait_scheduled(team_a, f"{PREFIX}-by-kubectl")
    wait_bind_phase(team_a, f"{PREFIX}-by-kubectl", ha.PHASE_SUCCESS)


def test_10_team_bs_l4_pod_runs_released(skip_own_cards, team_b):
    skip_own_cards("team-b")
    pod = team_b.read_namespaced_pod("inference-l4", "inference")
    assert pod.status.phase == "Running", pod.status.phase
    assert pod.metadata.annotations.get(ha.BIND_PHASE) == ha.PHASE_SUCCESS
    (devices,) = ha.decode_pod_devices(pod.metadata.annotations[ha.DEVICES_ALLOCATED])
    node = team_b.read_node(pod.spec.node_name)
    cards = {d.id: d.type for d in ha.decode_node_register(node.metadata.annotations[ha.NODE_REGISTER])}
    assert cards[devices[0].uuid] == "NVIDIA L4"


def test_11_every_gpu_pod_in_both_tenants_is_released(team_a, team_b):
    """No GPU pod left `allocating`: the lab's release controllers finished every one (nobody ran
    kubectl annotate)."""
    for core in (team_a, team_b):
        for pod in core.list_pod_for_all_namespaces().items:
            annotations = pod.metadata.annotations or {}
            holds_a_card = pod.status.phase not in ("Failed", "Succeeded")  # a finished pod's slice is freed
            if pod.spec.node_name and ha.DEVICES_ALLOCATED in annotations and holds_a_card:
                assert annotations.get(ha.BIND_PHASE) == ha.PHASE_SUCCESS, (pod.metadata.namespace, pod.metadata.name)


def test_a_second_up_changes_nothing(pulumi_stacks):
    for pulumi in pulumi_stacks:
        result = pulumi("preview", "--expect-no-changes")
        assert result.returncode == 0, result.stdout + result.stderr
