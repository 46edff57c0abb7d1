"""A tenant upgrade through the real engine, on a real kube-apiserver with kube-controller-manager
(deployment, replicaset, garbage collector, node lifecycle, namespace, disruption) and KWOK running the pods:
the version change of a tenant is planned in `preview --diff` as control plane, then each worker
(drain, replace, settle), one at a time, then HAMi's values; `up` carries it out in that order,
each worker's GPU pods placed again (bound, bind-phase success) before the next worker is
drained. An upgrade that cannot go on (a PodDisruptionBudget, pods that are not placed again)
stops with the reason, and the next `up` resumes where it stopped.

Stand-ins (tests/support): Kamaji's status and admin Secret; each docker worker (a KWOK node made
again for a new image); HAMi's Bind (binds to the first schedulable node) and its chart (a
ConfigMap of its values). The release controller is the project's own."""

from __future__ import annotations

import json
import re
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client

from components.config.model import GpuFleet
from components.controllers.release import controller as rc
from components.domain import hami_annotations as ha
from components.domain.inventory import gpu_capacity
from components.domain.names import MACHINE_ID_ANNOTATION
from components.kube.client import core_api
from tests.support.cluster import start_cluster
from tests.support.hami_stand_in import StandInBinder
from tests.support.kamaji_crd import crd
from tests.support.kamaji_stand_in import KamajiStandIn
from tests.support.kwok import start_kwok
from tests.support.tcp_proxy import TcpProxy
from tests.support.tools import require
from tests.support.waits import settles

PROGRAM = Path(__file__).parent / "programs" / "upgrade"
pytestmark = pytest.mark.integration
OLD, NEW = "v1.35.1", "v1.36.1"
NODES = ["lab-team-a-worker-0", "lab-team-a-worker-1"]
NS = "ml"
FLEET = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 1})  # the program's


@dataclass
class Lab:
    core: client.CoreV1Api
    apps: client.AppsV1Api
    kubeconfig: str
    api_port: int
    kamaji: KamajiStandIn
    binder: StandInBinder


def _endpoint_proxy(target: int) -> TcpProxy:
    """The tenant's endpoint (127.0.0.1:<apiPort>, a NodePort) forwarded to the test API server."""
    for port in range(31500, 31600):
        try:
            return TcpProxy(target, port=port)
        except OSError:
            continue
    raise RuntimeError("no free port in 31500-31599 for the tenant endpoint")


@pytest.fixture(scope="module")
def lab(tools):
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager", "kwok")
    tcp_crd = crd()
    cluster = start_cluster(tools)
    cluster.start_controller_manager(
        ["deployment", "replicaset", "garbagecollector", "nodelifecycle", "namespace", "disruption"]
    )
    start_kwok(cluster)
    client.ApiextensionsV1Api(cluster.api_client()).create_custom_resource_definition(tcp_crd)
    core = cluster.core()
    core.create_namespace({"metadata": {"name": NS}})
    kamaji = KamajiStandIn(cluster.api_client(), cluster.kubeconfig_text).start()
    binder = StandInBinder(core).start()
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text))
    thread = threading.Thread(target=controller.run, daemon=True)
    proxy = _endpoint_proxy(cluster.port)
    try:
        thread.start()
        assert controller.synced.wait(30)
        yield Lab(core, client.AppsV1Api(cluster.api_client()), cluster.kubeconfig_text, proxy.port, kamaji, binder)
    finally:
        controller.stop()
        binder.stop()
        kamaji.stop()
        proxy.close()
        cluster.stop()


@pytest.fixture
def stack(lab, pulumi_cli, tmp_path):
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", lab.kubeconfig)
    for key, value in {"apiPort": lab.api_port, "workers": len(NODES), "drainSeconds": 30, "settleSeconds": 60}.items():
        pulumi_cli("config", "set", key, str(value), cwd=work)
    pulumi_cli("config", "set", "version", OLD, cwd=work)
    yield work
    lab.apps.delete_collection_namespaced_deployment(NS)
    lab.core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    policy = client.PolicyV1Api(lab.core.api_client)
    policy.delete_collection_namespaced_pod_disruption_budget(NS)
    lab.binder.paused = False
    pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, check=False)


def gpu_pod_spec() -> dict:
    limits = {ha.RES_GPU: "1", ha.RES_GPUMEM: "20000", ha.RES_GPUCORES: "30"}
    return {
        "schedulerName": ha.SCHEDULER_NAME,  # as HAMi's webhook leaves it
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}],
    }


def start_workloads(lab: Lab) -> None:
    """What a team runs: a 2-pod GPU Deployment, and a bare GPU pod (no controller)."""
    labels = {"app": "train"}
    lab.apps.create_namespaced_deployment(
        NS,
        {
            "metadata": {"name": "train"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": gpu_pod_spec()},
            },
        },
    )
    lab.core.create_namespaced_pod(NS, {"metadata": {"name": "scratch"}, "spec": gpu_pod_spec()})
    assert settles(lambda: len(placed(lab)) == 2 and _released(lab.core.read_namespaced_pod("scratch", NS)), timeout=60)


def _released(pod: client.V1Pod) -> bool:
    return bool(pod.spec.node_name) and (pod.metadata.annotations or {}).get(ha.BIND_PHASE) == ha.PHASE_SUCCESS


def placed(lab: Lab) -> dict[str, str]:
    """The train pods bound with bind-phase success and not leaving: name -> node."""
    pods = lab.core.list_namespaced_pod(NS, label_selector="app=train").items
    return {p.metadata.name: p.spec.node_name for p in pods if _released(p) and not p.metadata.deletion_timestamp}


@dataclass
class Timeline:
    """What happened when, seen every 50 ms: nodes cordoned, gone, new (another uid); HAMi's
    values changed; the train pods placed at the start, and when each later one was first seen
    placed. (A count of the pods placed when a cordon is seen races the drain: it evicts right
    after cordoning, before a 50 ms look may see the cordon. A pod placed again is seen long
    before: the settled gate polls for it, then the next drain starts.)"""

    lab: Lab
    events: list[tuple[float, str]] = field(default_factory=list)
    cordoned_at: dict[str, float] = field(default_factory=dict)
    initial: dict[str, str] = field(default_factory=dict)  # pod -> node, when the timeline started
    first_placed: dict[str, float] = field(default_factory=dict)  # later pods: when first seen placed

    def __post_init__(self) -> None:
        self.initial = placed(self.lab)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        uids: dict[str, str] = {}  # the last uid seen of each node, kept while it is gone
        present: set[str] = set()
        cordoned: set[str] = set()
        values = None
        while not self._stop.wait(0.05):
            now = time.monotonic()
            nodes = {n.metadata.name: n for n in self.lab.core.list_node().items}
            for name in NODES:
                node = nodes.get(name)
                if node is None:
                    if name in present:
                        self.events.append((now, f"{name} gone"))
                    present.discard(name)
                    continue
                if name in uids and node.metadata.uid != uids[name]:
                    self.events.append((now, f"{name} new"))
                    cordoned.discard(name)
                uids[name] = node.metadata.uid
                present.add(name)
                if node.spec.unschedulable and name not in cordoned:
                    self.events.append((now, f"{name} cordoned"))
                    self.cordoned_at.setdefault(name, now)
                    cordoned.add(name)
            for pod in placed(self.lab):
                if pod not in self.initial:
                    self.first_placed.setdefault(pod, now)
            with suppress(client.ApiException):
                version = self.lab.core.read_namespaced_config_map("hami-values", "default").metadata.resource_version
                if values is not None and version != values:
                    self.events.append((now, "hami values"))
                values = version

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        return [what for _, what in sorted(self.events)]


def order_in(text: str, names: list[str]) -> list[int]:
    """Where each resource's step first appears in `pulumi preview --diff` output (by URN)."""
    return [text.index(f"::{name}]") for name in names]


def test_an_upgrade_moves_the_control_plane_then_each_worker_then_hami(lab, pulumi_cli, stack):
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    first_uids = {n: lab.core.read_node(n).metadata.uid for n in NODES}
    start_workloads(lab)

    pulumi_cli("config", "set", "version", NEW, cwd=stack)
    plan = pulumi_cli("preview", "--diff", cwd=stack).stdout
    steps = ["team-a-cp-tcp"]
    for i in range(len(NODES)):
        steps += [f"team-a-worker-{i}-drain", f"team-a-worker-{i}-machine", f"team-a-worker-{i}-settled"]
    steps.append("team-a-hami-values")
    where = order_in(plan, steps)
    assert where == sorted(where), plan
    assert re.search(r"\+-\s*pulumi-python:dynamic/gpu-tenancy-tests:StandInMachine", plan), plan

    timeline = Timeline(lab)
    started = time.monotonic()
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    events = timeline.stop()

    # the control plane first: Ready at the new version before any worker is touched
    (ready_at,) = [t for t, _, v in lab.kamaji.ready if v == NEW and t > started]
    first_cordon = min(t for t, what in timeline.events if what.endswith("cordoned"))
    assert ready_at < first_cordon
    # then the workers one at a time, each drained, replaced, and its pods placed again first
    expected = [f"{NODES[0]} cordoned", f"{NODES[0]} new", f"{NODES[1]} cordoned", f"{NODES[1]} new"]
    assert [e for e in events if e.endswith(("cordoned", "new"))] == expected, events
    # worker 0's pods were placed again first: when worker 1 is cordoned, its own pods and the
    # ones placed again since are both replicas
    second = timeline.cordoned_at[NODES[1]]
    again = [p for p, t in timeline.first_placed.items() if t < second]
    kept = [p for p, node in timeline.initial.items() if node == NODES[1]]
    assert len(kept) + len(again) == 2, (timeline.initial, timeline.first_placed, second)
    assert events[-1] == "hami values", events  # HAMi's kube-scheduler follows the last worker

    # what `up` left: new nodes with their fake cards, the Deployment's pods placed on them
    for node in NODES:
        obj = lab.core.read_node(node)
        assert obj.metadata.uid != first_uids[node] and not obj.spec.unschedulable
        assert ha.NODE_REGISTER in obj.metadata.annotations and MACHINE_ID_ANNOTATION in obj.metadata.annotations
        assert obj.status.capacity[ha.RES_GPU] == str(gpu_capacity(FLEET))  # the capacity seed, again
    now = placed(lab)
    assert len(now) == 2 and set(now.values()) <= set(NODES)
    assert all(lab.core.read_node(n).metadata.uid != first_uids[n] for n in now.values())
    scratch = lab.core.list_namespaced_pod(NS, field_selector="metadata.name=scratch").items
    assert not scratch  # a bare pod is evicted (kubectl drain --force); nothing brings it back
    values = json.loads(lab.core.read_namespaced_config_map("hami-values", "default").data["values.json"])
    assert values["scheduler"]["kubeScheduler"]["image"]["tag"] == NEW
    tcp = client.CustomObjectsApi(lab.core.api_client).get_namespaced_custom_object(
        "kamaji.clastix.io", "v1alpha1", "tenant-team-a", "tenantcontrolplanes", "team-a"
    )
    assert tcp["spec"]["kubernetes"]["version"] == NEW
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)


def test_an_upgrade_that_cannot_go_on_stops_with_the_reason_and_resumes(lab, pulumi_cli, stack):
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    start_workloads(lab)
    lab.core.delete_namespaced_pod("scratch", NS, grace_period_seconds=0)
    policy = client.PolicyV1Api(lab.core.api_client)
    policy.create_namespaced_pod_disruption_budget(
        NS, {"metadata": {"name": "train"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}}}
    )
    budget = lambda: policy.read_namespaced_pod_disruption_budget("train", NS).status  # noqa: E731
    assert settles(lambda: budget().expected_pods == 2 and budget().disruptions_allowed == 0, timeout=30)
    on_worker_0 = sorted(n for n, node in placed(lab).items() if node == NODES[0])
    assert on_worker_0  # the binder puts them on the first node

    pulumi_cli("config", "set", "version", NEW, cwd=stack)
    blocked = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack, check=False)
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0
    assert f"node {NODES[0]}: {len(on_worker_0)} pod(s) still there after 30 s of draining" in out, out
    assert all(f"{NS}/{pod}" in out for pod in on_worker_0), out
    assert lab.core.read_node(NODES[1]).spec.unschedulable is None  # the next worker was not touched

    # the budget lifted, HAMi's binder down: the worker is replaced, its pods are not placed again
    policy.delete_namespaced_pod_disruption_budget("train", NS)
    lab.binder.paused = True
    stuck = pulumi_cli("up", "--yes", "--skip-preview", cwd=stack, check=False)
    out = stuck.stdout + stuck.stderr
    assert stuck.returncode != 0
    assert f"node {NODES[0]} is Ready, but after 60 s the pods it handed over are not all placed again" in out, out
    assert re.search(rf"{NS}/ReplicaSet/train-\w+: 0 of 2 placed", out), out
    assert not lab.core.read_node(NODES[1]).spec.unschedulable

    # HAMi back: the next `up` settles worker 0, then goes on with worker 1 and HAMi
    lab.binder.paused = False
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    assert len(placed(lab)) == 2
    values = json.loads(lab.core.read_namespaced_config_map("hami-values", "default").data["values.json"])
    assert values["scheduler"]["kubeScheduler"]["image"]["tag"] == NEW
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)
