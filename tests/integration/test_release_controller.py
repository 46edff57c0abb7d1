"""The release controller against a real kube-apiserver (and etcd): pods created with the plain
API client, bound the way HAMi's Bind leaves them (hami_stand_in), are released without any
manual step; the watch survives dropped connections, an API-server restart and 410 Gone."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from components.controllers.release import controller as rc
from components.controllers.release import lock as lr
from components.controllers.release.daemon import serve_http
from components.controllers.release.policy import RBAC_RULES
from components.domain import hami_annotations as ha
from components.kube.client import cluster_ca, core_api, token_kubeconfig
from tests.support.cluster import add_node, free_port, start_cluster
from tests.support.hami_stand_in import hami_bind, hami_event, new_pod, wait_for_pod, wait_released
from tests.support.release_process import controller_process, http_status
from tests.support.tcp_proxy import TcpProxy
from tests.support.tools import ROOT, require
from tests.support.waits import settles

pytestmark = pytest.mark.integration


@pytest.fixture
def ns(cluster):
    name = f"rc-{uuid.uuid4().hex[:6]}"
    cluster.core().create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@contextmanager
def running(core, namespace: str, **kwargs) -> Iterator[rc.ReleaseController]:
    controller = rc.ReleaseController(core, namespace=namespace, backoff_max=1.0, **kwargs)
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    assert controller.synced.wait(30), "the controller never finished its first list"
    try:
        yield controller
    finally:
        controller.stop()
        thread.join(30)
        assert not thread.is_alive(), "the controller did not stop"


def eventually(check, timeout: float = 10) -> None:
    """Workers handle pods after the watch sees them: wait for what they do."""
    assert settles(check, timeout=timeout, interval=0.05), "not within the timeout"


def sample(controller: rc.ReleaseController, name: str, **labels) -> float:
    return controller.metrics.registry.get_sample_value(name, labels or None) or 0.0


def node_lock(core, node):
    return (core.read_node(node).metadata.annotations or {}).get(ha.NODE_LOCK)


def phase(core, ns, pod):
    return (core.read_namespaced_pod(pod, ns).metadata.annotations or {}).get(ha.BIND_PHASE)


def lock_for(ns, pod):
    return ha.encode_node_lock(ha.NodeLock(datetime.now(UTC), ns, pod))


def test_every_pod_bound_after_start_is_released_in_turn(cluster, ns, node):
    core = cluster.core()
    with running(core_api(cluster.kubeconfig_text), ns) as c:
        for i in range(3):  # each bind needs the lock the previous pod held
            new_pod(core, ns, f"p{i}")
            hami_bind(core, ns, f"p{i}", node)
            wait_released(core, ns, f"p{i}", node)
        # each lock freed once: when HAMi marked the pod allocating, or (if that event came
        # only with the Binding) when the pod was bound
        freed = sample(c, "gpu_tenancy_locks_freed_at_allocation_total")
        assert freed + sample(c, "gpu_tenancy_releases_total", outcome="released") == 3
        assert sample(c, "gpu_tenancy_release_delay_seconds_count") == 3
        assert sample(c, "gpu_tenancy_relists_total") == 1
        assert c.healthy()


def test_pods_already_allocating_at_start_are_released(cluster, ns, node):
    core = cluster.core()
    new_pod(core, ns, "early")
    hami_bind(core, ns, "early", node)
    other = f"rc-node-{uuid.uuid4().hex[:6]}"
    add_node(cluster, other)
    # a release cut between its two writes: bind-phase success, lock still naming the pod
    new_pod(core, ns, "half")
    hami_bind(core, ns, "half", other)
    core.patch_namespaced_pod("half", ns, {"metadata": {"annotations": {ha.BIND_PHASE: ha.PHASE_SUCCESS}}})
    with running(core_api(cluster.kubeconfig_text), ns):
        wait_released(core, ns, "early", node)
        wait_released(core, ns, "half", other)
    core.delete_node(other)


def test_watch_dropped_and_resumed_from_its_resource_version(cluster, ns, node):
    core = cluster.core()
    proxy = TcpProxy(cluster.port)
    try:
        with running(core_api(proxy.kubeconfig(cluster.kubeconfig_text, cluster.port)), ns) as c:
            watches = sample(c, "gpu_tenancy_watch_sessions_total")
            proxy.cut(refuse=True)
            new_pod(core, ns, "during-cut")
            hami_bind(core, ns, "during-cut", node)
            time.sleep(2)
            assert node_lock(core, node) is not None, "released while the controller could not reach the API"
            proxy.restore()
            wait_released(core, ns, "during-cut", node)
            assert sample(c, "gpu_tenancy_relists_total") == 1, "re-listed instead of resuming"
            assert sample(c, "gpu_tenancy_watch_sessions_total") > watches
            assert sample(c, "gpu_tenancy_release_failures_total", kind="api") >= 1
    finally:
        proxy.close()


def test_api_server_restart(cluster, ns, node):
    core = cluster.core()
    with running(core_api(cluster.kubeconfig_text), ns) as c:
        cluster.restart_apiserver(down_seconds=2)
        core = cluster.core()
        new_pod(core, ns, "after-restart")
        hami_bind(core, ns, "after-restart", node)
        wait_released(core, ns, "after-restart", node, timeout=60)
        assert sample(c, "gpu_tenancy_release_failures_total", kind="api") >= 1
        assert c.healthy()


def test_410_gone_lists_again(tools):
    require(tools, "kube-apiserver", "etcd", "openssl")
    # Without the watch cache a watch reads etcd directly, so a compacted revision is 410 Gone.
    own = start_cluster(tools, api_args=["--watch-cache=false"])
    proxy = TcpProxy(own.port)
    try:
        core = own.core()
        add_node(own, "gone-node")
        with running(core_api(proxy.kubeconfig(own.kubeconfig_text, own.port)), "default") as c:
            proxy.cut(refuse=True)
            new_pod(core, "default", "after-compaction")
            hami_bind(core, "default", "after-compaction", "gone-node")
            for i in range(5):
                core.create_namespaced_config_map("default", {"metadata": {"name": f"churn-{i}"}})
            own.etcd_compact()
            proxy.restore()
            wait_released(core, "default", "after-compaction", "gone-node", timeout=60)
            assert sample(c, "gpu_tenancy_relists_total") >= 2, "resumed from a compacted resourceVersion"
    finally:
        proxy.close()
        own.stop()


def test_foreign_malformed_and_real_gpu_locks_are_left_alone(cluster, ns, node, caplog):
    core = cluster.core()
    real_gpu = f"rc-real-{uuid.uuid4().hex[:6]}"
    add_node(cluster, real_gpu, mock_gpu=False)
    bad = f"rc-bad-{uuid.uuid4().hex[:6]}"
    add_node(cluster, bad)
    try:
        with caplog.at_level(logging.WARNING, logger="gpu-tenancy.lock-release"):
            with running(core_api(cluster.kubeconfig_text), ns) as c:
                # foreign: the lock names another pod (HAMi re-took it for someone else)
                new_pod(core, ns, "mine")
                foreign = lock_for("other-ns", "other-pod")
                core.patch_node(node, {"metadata": {"annotations": {ha.NODE_LOCK: foreign}}})
                core.patch_namespaced_pod("mine", ns, {"metadata": {"annotations": {ha.BIND_PHASE: "allocating"}}})
                core.create_namespaced_pod_binding(
                    "mine",
                    ns,
                    client.V1Binding(metadata={"name": "mine"}, target={"kind": "Node", "name": node}),
                    _preload_content=False,
                )
                # malformed lock
                new_pod(core, ns, "odd")
                core.patch_node(bad, {"metadata": {"annotations": {ha.NODE_LOCK: "not-a-lock"}}})
                core.patch_namespaced_pod("odd", ns, {"metadata": {"annotations": {ha.BIND_PHASE: "allocating"}}})
                core.create_namespaced_pod_binding(
                    "odd",
                    ns,
                    client.V1Binding(metadata={"name": "odd"}, target={"kind": "Node", "name": bad}),
                    _preload_content=False,
                )
                # a real GPU node: its device plugin finishes the allocation, not us
                new_pod(core, ns, "real")
                hami_bind(core, ns, "real", real_gpu)
                settles(
                    lambda: sample(c, "gpu_tenancy_releases_total", outcome="succeeded") >= 2, timeout=20, interval=0.1
                )
                time.sleep(0.5)
                assert sample(c, "gpu_tenancy_releases_total", outcome="not-mock") >= 1
        assert node_lock(core, node) == foreign and phase(core, ns, "mine") == ha.PHASE_SUCCESS
        assert node_lock(core, bad) == "not-a-lock" and phase(core, ns, "odd") == ha.PHASE_SUCCESS
        assert "leaving malformed" in caplog.text
        assert phase(core, ns, "real") == ha.PHASE_ALLOCATING
        assert ha.lock_held_by(node_lock(core, real_gpu), ns, "real")
    finally:
        core.delete_node(real_gpu)
        core.delete_node(bad)


def test_pod_on_a_vanished_node_is_reported_not_retried(cluster, ns):
    core = cluster.core()
    gone = f"rc-gone-{uuid.uuid4().hex[:6]}"
    add_node(cluster, gone)
    new_pod(core, ns, "orphan")
    hami_bind(core, ns, "orphan", gone)
    core.delete_node(gone)
    with running(core_api(cluster.kubeconfig_text), ns) as c:
        eventually(lambda: sample(c, "gpu_tenancy_releases_total", outcome=lr.NODE_GONE) == 1)
        core.delete_namespaced_pod("orphan", ns, grace_period_seconds=0)
        time.sleep(0.5)
        assert c.healthy()


def test_pending_pod_is_logged_in_hamis_words(cluster, ns, caplog):
    core = cluster.core()
    with caplog.at_level(logging.WARNING, logger="gpu-tenancy.release-controller"):
        with running(core_api(cluster.kubeconfig_text), ns):
            new_pod(core, ns, "too-big", scheduler="hami-scheduler")
            hami_event(core, ns, "too-big", "FilteringFailed", "1 nodes CardInsufficientCore(team-a-worker-0)")
            hami_event(core, ns, "too-big", "FilteringFailed", "no available node, 1 nodes do not meet")
            core.patch_namespaced_pod_status(
                "too-big",
                ns,
                {
                    "status": {
                        "conditions": [
                            {
                                "type": "PodScheduled",
                                "status": "False",
                                "reason": "Unschedulable",
                                "message": "0/1 nodes are available: 1 NodeUnfitPod.",
                            }
                        ]
                    }
                },
            )
            settles(lambda: "CardInsufficientCore" in caplog.text, timeout=10, interval=0.1)
    assert f"{ns}/too-big is Pending: HAMi: CardInsufficientCore on team-a-worker-0" in caplog.text
    assert "not enough GPU cores" in caplog.text


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        s.name + "".join(f"|{k}={v}" for k, v in sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_command_with_least_privilege_releases_a_pod_made_with_the_plain_client(cluster, ns, node, tmp_path):
    """`python -m components.controllers.release` as the lab's container runs it: its own
    ServiceAccount limited to RBAC_RULES, /metrics and /healthz on its port."""
    core = cluster.core()
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    sa = f"releaser-{ns}"
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=sa)))
    rbac.create_cluster_role({"metadata": {"name": sa}, "rules": [dict(r) for r in RBAC_RULES]})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }
    )
    token = core.create_namespaced_service_account_token(sa, ns, {"spec": {"expirationSeconds": 3600}}).status.token
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token)
    )
    port = free_port()
    log = open(tmp_path / "controller.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.controllers.release", "--kubeconfig", str(kubeconfig), "--listen",
         f"127.0.0.1:{port}"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:

        def ready() -> bool:
            assert proc.poll() is None, (tmp_path / "controller.log").read_text()
            return http_status(port, "/readyz") == 200

        settles(ready, timeout=30, interval=0.2)
        new_pod(core, ns, "kubectl-made")
        wait_for_pod(core, ns, "kubectl-made")
        hami_bind(core, ns, "kubectl-made", node)
        wait_released(core, ns, "kubectl-made", node)
        metrics = _metrics(port)
        freed = metrics.get("gpu_tenancy_locks_freed_at_allocation_total", 0)
        assert freed + metrics.get("gpu_tenancy_releases_total|outcome=released", 0) >= 1
        assert metrics["gpu_tenancy_release_delay_seconds_count"] >= 1
        assert http_status(port, "/healthz") == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        text = (tmp_path / "controller.log").read_text()
        assert f"{ns}/kubectl-made on {node}: released" in text or f"{ns}/kubectl-made on {node}: succeeded" in text
        assert "s after HAMi's bind time" in text
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


def poison_pod(core, ns: str, name: str, node: str) -> None:
    """A pod that carries only HAMi-looking annotations (no GPU, no budget needed)."""
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=name, annotations={ha.BIND_PHASE: ha.PHASE_ALLOCATING, ha.VGPU_NODE: node}
            ),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        ),
    )


def release_seconds(core, ns: str, pods: list[str], node: str) -> list[float]:
    """Bind each pod as HAMi's Bind does, one after another; seconds from each bind to its release."""
    out = []
    for pod in pods:
        new_pod(core, ns, pod)
        bound = hami_bind(core, ns, pod, node)
        out.append(wait_released(core, ns, pod, node, timeout=30) - bound)
    return out


@pytest.mark.parametrize("node_name", ["a%b", "gpu-0/status", "a" * 254, "Upper"])
def test_a_poison_pod_never_stops_releases_for_the_others(cluster, ns, node, node_name, caplog):
    core = cluster.core()
    with caplog.at_level(logging.INFO, logger="gpu-tenancy.release-controller"):
        with running(core_api(cluster.kubeconfig_text), ns) as c:
            poison_pod(core, ns, "poison", node_name)
            # the watch shows it again whenever it changes: still said once
            for i in range(3):
                core.patch_namespaced_pod("poison", ns, {"metadata": {"labels": {"touch": str(i)}}})
            delays = release_seconds(core, ns, ["p0", "p1", "p2"], node)
            assert max(delays) < 1.0, f"releases after a poison pod took {delays}"
            assert sample(c, "gpu_tenancy_pods_not_handled_total", reason="invalid-node-name") == 1
            assert c.healthy()
    assert caplog.text.count(f"{ns}/poison: not ours") == 1
    assert "watch failed" not in caplog.text


def refuse_writes(cluster, ns: str, pod: str, reason: str) -> str:
    """An admission policy refusing bind-phase success on one pod, with `reason` (Forbidden = 403,
    Invalid = 422); returns its name once the API server enforces it."""
    api = client.AdmissionregistrationV1Api(cluster.api_client())
    name = f"refuse-{ns}-{reason.lower()}"
    api.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
                    ]
                },
                "matchConditions": [
                    {"name": "one-pod", "expression": f"object.metadata.name == '{pod}'"},
                    {"name": "in-ns", "expression": f"object.metadata.namespace == '{ns}'"},
                ],
                "validations": [
                    {
                        "expression": f"object.metadata.?annotations[?'{ha.BIND_PHASE}'].orValue('') != 'success'",
                        "message": "this pod may not be released",
                        "reason": reason,
                    }
                ],
            },
        }
    )
    api.create_validating_admission_policy_binding(
        {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    )
    core = cluster.core()

    def enforced() -> bool:  # the policy takes a moment to be enforced
        try:
            core.patch_namespaced_pod(pod, ns, {"metadata": {"annotations": {ha.BIND_PHASE: "success"}}}, dry_run="All")
        except client.ApiException as exc:
            if exc.status in (403, 422):
                return True
            if exc.status != 404:
                raise
            new_pod(core, ns, pod)
        return False

    if settles(enforced, timeout=30, interval=0.2):
        return name
    raise AssertionError("the refusing policy was never enforced")


def drop_policy(cluster, name: str) -> None:
    api = client.AdmissionregistrationV1Api(cluster.api_client())
    api.delete_validating_admission_policy_binding(name)
    api.delete_validating_admission_policy(name)


def stuck_events(core, ns: str, pod: str) -> list:
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod}").items
    return [e for e in events if e.reason == "ReleaseStuck"]


@pytest.mark.parametrize("reason, status", [("Forbidden", 403), ("Invalid", 422)])
def test_refused_pod_never_restarts_controller(cluster, ns, node, reason, status, caplog):
    """A pod whose release is refused is retried alone and reported (the stuck gauge, a Warning
    Event on the pod); /healthz stays 200 and names no pod, so the watchdog never exits."""
    core = cluster.core()
    other = f"rc-other-{uuid.uuid4().hex[:6]}"
    add_node(cluster, other)
    policy = refuse_writes(cluster, ns, "refused", reason)
    server = None
    try:
        with caplog.at_level(logging.INFO, logger="gpu-tenancy.release-controller"):
            with running(core_api(cluster.kubeconfig_text), ns, stuck_seconds=2.0, pod_backoff_max=0.5) as c:
                port = free_port()
                server = serve_http(c, "127.0.0.1", port)
                hami_bind(core, ns, "refused", other)
                delays = release_seconds(core, ns, ["q0", "q1", "q2"], node)
                assert max(delays) < 1.0, f"releases beside a refused pod took {delays}"
                assert phase(core, ns, "refused") == ha.PHASE_ALLOCATING
                assert sample(c, "gpu_tenancy_pods_not_handled_total", reason=f"refused-{status}") == 1
                eventually(lambda: stuck_events(core, ns, "refused"), timeout=15)
                [event] = stuck_events(core, ns, "refused")
                assert event.type == "Warning" and event.involved_object.kind == "Pod"
                assert other in event.message and str(status) in event.message
                assert sample(c, "gpu_tenancy_pods_stuck") == 1
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
                    body = resp.read().decode()
                assert resp.status == 200 and "1 pod(s) still allocating" in body and "refused" not in body
                assert c.healthy()
                assert sample(c, "gpu_tenancy_pod_retries_total") >= 2, "not retried"
                drop_policy(cluster, policy)
                policy = ""
                wait_released(core, ns, "refused", other, timeout=30)
                eventually(lambda: sample(c, "gpu_tenancy_pods_stuck") == 0)
                assert c.health() == (True, "ok")
        assert caplog.text.count(f"{ns}/refused: not released") == 1
    finally:
        if server:
            server.shutdown()
        if policy:
            drop_policy(cluster, policy)
        core.delete_node(other)


def test_stop_is_prompt_on_a_quiet_watch(cluster, ns):
    """stop() hangs up the open watch. Without that, a quiet watch holds run() until the API
    server's next bookmark (about a minute) or its timeout (here an hour): the bound on the join
    is far below both, and far above what a hang-up takes."""
    controller = rc.ReleaseController(core_api(cluster.kubeconfig_text), namespace=ns, watch_seconds=3600)
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    assert controller.synced.wait(30)
    eventually(lambda: sample(controller, "gpu_tenancy_watch_sessions_total") >= 1)
    controller.stop()
    thread.join(20)
    assert not thread.is_alive(), "run() waited for the quiet watch"


def test_sigterm_ends_the_process_promptly(cluster, ns):
    """`docker stop` sends SIGTERM, then SIGKILL 10 s later: with its watch open and quiet, the
    process exits cleanly (code 0) before that."""
    with controller_process(cluster.kubeconfig_text, "--namespace", ns) as (proc, port):
        eventually(lambda: _metrics(port).get("gpu_tenancy_watch_sessions_total", 0) >= 1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
