"""ReleaseWait (dynamic provider) under the real engine against the real kube-apiserver: the
workload's pod is bound by a stand-in for HAMi's Bind (hami_stand_in), the release controller
releases it (the one writer), and the provider, run by the engine's Python dynamic-provider
host, waits for that and reports it; a pod nobody releases fails the update saying so."""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from pathlib import Path

import pytest

from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.kube.client import core_api
from components.providers import release_wait as rw
from tests.support.cluster import TOKEN, add_node
from tests.support.hami_stand_in import SCHEDULER_SAYS, hami_bind, mark_unschedulable, wait_for_pod

PROGRAM = Path(__file__).parent / "programs" / "workload"
pytestmark = pytest.mark.integration


@pytest.fixture
def stack(pulumi_cli, cluster, tmp_path):
    node = f"wl-node-{uuid.uuid4().hex[:6]}"
    add_node(cluster, node)
    work = tmp_path / "program"
    shutil.copytree(PROGRAM, work)
    pulumi_cli("stack", "init", "test", cwd=work)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=work)
    yield work, node
    pulumi_cli("destroy", "--yes", cwd=work, check=False)
    cluster.core().delete_node(node)


@pytest.fixture
def controller(cluster):
    """The tenant's release controller, as the lab runs one beside every mock-GPU tenant."""
    c = rc.ReleaseController(core_api(cluster.kubeconfig_text), namespace="default", backoff_max=1.0)
    thread = threading.Thread(target=c.run, daemon=True)
    thread.start()
    assert c.synced.wait(30)
    yield c
    c.stop()
    thread.join(15)


def set_workload(pulumi_cli, work, **fields):
    workload = {
        "name": "trainer",
        "image": "busybox",
        "gpumemMb": 20000,
        "gpucoresPercent": 30,
        "waitSeconds": 60,
        **fields,
    }
    pulumi_cli("config", "set", "workload", json.dumps(workload), cwd=work)


def test_up_waits_for_the_release_and_a_second_up_changes_nothing(pulumi_cli, cluster, stack, controller):
    work, node = stack
    set_workload(pulumi_cli, work)
    core = cluster.core()

    def hami():
        wait_for_pod(core, "default", "trainer")
        hami_bind(core, "default", "trainer", node)

    binder = threading.Thread(target=hami)
    binder.start()
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
    binder.join()
    assert "pulumi-python:dynamic/gpu-tenancy:ReleaseWait" in up.stdout
    pod = core.read_namespaced_pod("trainer", "default")
    assert pod.metadata.annotations[ha.BIND_PHASE] == ha.PHASE_SUCCESS
    assert ha.NODE_LOCK not in (core.read_node(node).metadata.annotations or {})
    assert pod.metadata.labels["gpu-tenancy/tenant"] == "team-a"
    outputs = json.loads(pulumi_cli("stack", "output", "--json", cwd=work).stdout)
    assert outputs["pods"] == [{"name": "trainer", "node": node, "status": "bound", "reason": ""}]
    state = pulumi_cli("stack", "export", cwd=work).stdout
    assert TOKEN not in state, "the kubeconfig's token is in the state in clear text"

    pulumi_cli("preview", "--expect-no-changes", cwd=work)
    again = pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
    assert "updated" not in again.stdout and "created" not in again.stdout, again.stdout

    # A stack made before the rename (BindRelease) is the same state under the old type: its alias
    # keeps it, no replace; a type the code does not alias would be replaced (the check can fail).
    new_type, old_type = "pulumi-python:dynamic/gpu-tenancy:ReleaseWait", rw.PREVIOUS_TYPE
    for typ, kept in ((old_type, True), ("pulumi-python:dynamic/gpu-tenancy:Unaliased", False)):
        (work / "state.json").write_text(state.replace(new_type, typ))
        pulumi_cli("stack", "import", "--file", "state.json", cwd=work)
        preview = pulumi_cli("preview", "--expect-no-changes", "--diff", cwd=work, check=False)
        assert (preview.returncode == 0) is kept, preview.stdout
    (work / "state.json").write_text(state)
    pulumi_cli("stack", "import", "--file", "state.json", cwd=work)
    (work / "state.json").unlink()


def test_pod_that_stays_pending_fails_the_up_with_the_scheduler_reason(pulumi_cli, cluster, stack):
    work, _ = stack
    set_workload(pulumi_cli, work, name="too-big", waitSeconds=5)
    core = cluster.core()

    def scheduler():
        wait_for_pod(core, "default", "too-big")
        mark_unschedulable(
            core,
            "default",
            "too-big",
            SCHEDULER_SAYS.format("CardInsufficientCore"),
        )

    t = threading.Thread(target=scheduler)
    t.start()
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=work, check=False)
    t.join()
    out = up.stdout + up.stderr
    assert up.returncode != 0
    assert "1 pod(s) not scheduled by HAMi within 5 s: default/too-big" in out
    assert "CardInsufficientCore" in out


def test_pending_pod_declared_on_purpose_reports_the_reason_as_output(pulumi_cli, cluster, stack):
    work, _ = stack
    set_workload(pulumi_cli, work, name="waits", waitSeconds=5, failOnPending=False)
    core = cluster.core()

    def scheduler():
        wait_for_pod(core, "default", "waits")
        mark_unschedulable(
            core,
            "default",
            "waits",
            SCHEDULER_SAYS.format("CardInsufficientMemory"),
        )

    t = threading.Thread(target=scheduler)
    t.start()
    pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
    t.join()
    (pod,) = json.loads(pulumi_cli("stack", "output", "pods", "--json", cwd=work).stdout)
    assert pod["status"] == "not-bound" and "CardInsufficientMemory" in pod["reason"]


def test_allocation_marked_failed_fails_the_up_with_the_node(pulumi_cli, cluster, stack):
    work, node = stack
    set_workload(pulumi_cli, work, name="broken", waitSeconds=30)
    core = cluster.core()

    def hami():
        wait_for_pod(core, "default", "broken")
        hami_bind(core, "default", "broken", node, phase=ha.PHASE_FAILED)

    t = threading.Thread(target=hami)
    t.start()
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=work, check=False)
    t.join()
    out = up.stdout + up.stderr
    assert up.returncode != 0
    assert f"1 pod(s) whose GPU allocation HAMi marked failed: default/broken on {node}" in out


def test_a_pod_nobody_releases_fails_the_up_and_the_wait_writes_nothing(pulumi_cli, cluster, stack):
    """No release controller runs: ReleaseWait does not release the pod itself (one writer)."""
    work, node = stack
    set_workload(pulumi_cli, work, name="orphan", waitSeconds=5)
    core = cluster.core()

    def hami():
        wait_for_pod(core, "default", "orphan")
        hami_bind(core, "default", "orphan", node)

    t = threading.Thread(target=hami)
    t.start()
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=work, check=False)
    t.join()
    out = up.stdout + up.stderr
    assert up.returncode != 0
    assert "1 pod(s) bound but not released by HAMi's allocation: default/orphan" in out
    assert "release controller" in out
    assert core.read_namespaced_pod("orphan", "default").metadata.annotations[ha.BIND_PHASE] == ha.PHASE_ALLOCATING
    assert ha.NODE_LOCK in (core.read_node(node).metadata.annotations or {})
