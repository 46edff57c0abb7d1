"""Rollouts through the real engine on a real kube-apiserver with kube-controller-manager's
deployment, replicaset and resourcequota controllers and KWOK running the pods: a GPU
Deployment whose budget share is exactly its use (the dev stack's `shared-a100`, 3 x 30 % of
one card) rolls out to a new image, and `up` returns only once the new pods are bound and
released and the old ones are gone; a surge the config allows is counted in the share, so its
rollout finishes too; a rollout the quota refuses fails `up` with the quota's reason.

Two labs: HAMi's stand-in binder (CI: it binds every pod that asks for HAMi, no decision), and
HAMi's real scheduler and webhook (HAMI_SCHEDULER; skipped, saying why, without it)."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from components.config.model import GpuFleet
from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.inventory import node_devices
from components.domain.names import WORKLOAD_LABEL
from components.kube.client import core_api
from components.lifecycle.release_wait import TEMPLATE_HASH
from components.lifecycle.simulated_nodes import ensure_nodes
from components.tenant.gpu_quota import QUOTA_NAME
from tests.support.cluster import start_cluster
from tests.support.hami_stand_in import StandInBinder
from tests.support.kwok import start_kwok
from tests.support.real_hami import SKIP_REASON, RealHami, binary
from tests.support.tools import require

PROGRAM = Path(__file__).parent / "programs" / "rollout"
pytestmark = pytest.mark.integration
FLEET = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 1})
NODE = "lab-team-a-sim-0"
NS = "ml"


@pytest.fixture(scope="module", params=["stand-in", "real-hami"])
def lab(request, tools):
    """A tenant-like cluster with one simulated A100 node, its release controller, and HAMi
    (real or stand-in)."""
    real = request.param == "real-hami"
    path = binary() if real else None
    if real and path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager", "kwok")
    if real:
        require(tools, "kube-scheduler")
    cluster = start_cluster(tools)
    cluster.start_controller_manager(["deployment", "replicaset", "resourcequota", "garbagecollector", "nodelifecycle"])
    start_kwok(cluster)
    core = cluster.core()
    ensure_nodes(core_api(cluster.kubeconfig_text), [NODE], "team-a", "sim", FLEET)
    hami = RealHami(cluster, path).start() if real else None
    binder = None if real else StandInBinder(core, NODE).start()
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text))
    thread = threading.Thread(target=controller.run, daemon=True)
    try:
        if hami:
            hami.wait_registered({NODE: [d.id for d in node_devices("team-a", NODE, FLEET)]}, timeout=120)
        thread.start()
        assert controller.synced.wait(30)
        yield cluster, not real
    finally:
        controller.stop()
        if binder:
            binder.stop()
        if hami:
            hami.stop()
        cluster.stop()


@pytest.fixture
def stack(lab, pulumi_cli, tmp_path):
    cluster, stand_in = lab
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", cluster.kubeconfig_text)
    pulumi_cli("config", "set", "webhookStandIn", json.dumps(stand_in), cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, check=False)
    core = cluster.core()
    gone = core.list_namespaced_pod(NS).items
    for pod in gone:  # retained namespace: its pods go with the Deployment; leave no leftovers
        core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)


def set_workload(pulumi_cli, work: Path, name: str, image: str, replicas: int = 3, **fields) -> None:
    workload = {
        "name": name,
        "kind": "Deployment",
        "namespace": NS,
        "image": image,
        "replicas": replicas,
        "gpumemMb": 20000,
        "gpucoresPercent": 30,
        "waitSeconds": 90,
        **fields,
    }
    pulumi_cli("config", "set", "workload", json.dumps(workload), cwd=work)


def up(pulumi_cli, work: Path) -> dict:
    """`up`, then the stack's outputs."""
    pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
    return json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=work).stdout)


def pods_of(core: client.CoreV1Api, name: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(NS, label_selector=f"{WORKLOAD_LABEL}={name}").items


class PeakCounter:
    """The most pods of a workload that existed at once (counted every 50 ms)."""

    def __init__(self, core: client.CoreV1Api, name: str):
        self.core, self.name, self.peak = core, name, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, len(pods_of(self.core, self.name)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def test_a_rollout_at_full_budget_finishes_and_up_waits_for_it(lab, pulumi_cli, stack):
    cluster, _ = lab
    core = cluster.core()
    name = f"shared-{uuid.uuid4().hex[:5]}"
    set_workload(pulumi_cli, stack, name, "busybox:1.36")
    first = up(pulumi_cli, stack)
    assert first["shares"][NS] == [3, 60000, 90]  # exactly its use: no room to surge
    before = {p["name"] for p in first["pods"]}
    assert len(before) == 3

    set_workload(pulumi_cli, stack, name, "busybox:1.37")
    peak = PeakCounter(core, name)
    second = up(pulumi_cli, stack)
    assert peak.stop() <= 3  # surge 0: never a pod the share has no room for
    after = {p["name"]: p for p in second["pods"]}
    assert len(after) == 3 and not before & set(after)
    assert all(p["status"] == "bound" for p in after.values())
    # When up returned: the new template's pods only, each released, none leaving.
    live = pods_of(core, name)
    assert {p.metadata.name for p in live} == set(after)
    assert len({p.metadata.labels[TEMPLATE_HASH] for p in live}) == 1
    assert all(p.metadata.annotations[ha.BIND_PHASE] == ha.PHASE_SUCCESS for p in live)
    assert all(p.spec.containers[0].image == "busybox:1.37" and not p.metadata.deletion_timestamp for p in live)
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)


def test_a_surge_is_counted_in_the_share_so_its_rollout_finishes(lab, pulumi_cli, stack):
    cluster, _ = lab
    core = cluster.core()
    name = f"surging-{uuid.uuid4().hex[:5]}"
    rollout = {"maxSurge": 1, "maxUnavailable": 0}
    set_workload(pulumi_cli, stack, name, "busybox:1.36", replicas=2, rollout=rollout)
    first = up(pulumi_cli, stack)
    assert first["shares"][NS] == [3, 60000, 90]  # 2 pods + 1 surge pod

    set_workload(pulumi_cli, stack, name, "busybox:1.37", replicas=2, rollout=rollout)
    peak = PeakCounter(core, name)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert peak.stop() == 3  # the surge pod was admitted by the quota, and placed
    live = pods_of(core, name)
    assert len(live) == 2 and all(p.spec.containers[0].image == "busybox:1.37" for p in live)


def test_a_rollout_the_quota_refuses_fails_up_with_the_quotas_reason(lab, pulumi_cli, stack):
    """Someone tightened the namespace's quota by hand below the workload's use: the new pod is
    refused, and `up` says so instead of reporting success with the old pods running."""
    cluster, _ = lab
    core = cluster.core()
    name = f"tight-{uuid.uuid4().hex[:5]}"
    set_workload(pulumi_cli, stack, name, "busybox:1.36", waitSeconds=20)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    tight = {f"{p}.{ha.RES_GPUCORES}": "60" for p in ("limits", "requests")}
    core.patch_namespaced_resource_quota(QUOTA_NAME, NS, {"spec": {"hard": tight}})

    set_workload(pulumi_cli, stack, name, "busybox:1.37", waitSeconds=20)
    up = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack, check=False)
    assert up.returncode != 0
    out = up.stdout + up.stderr
    assert "not scheduled by HAMi within 20 s" in out, out
    # the ResourceQuota admission says "exceeded quota"; HAMi 2.10's webhook, by its own count, first
    assert "of 3 new pods exist" in out, out
    assert "exceeded quota" in out or "exceeding resource quota" in out, out
    assert "of the previous rollout still there" in out, out
