"""Which Kubernetes client the program's automation uses, decided by measurement against a real
kube-apiserver (requests are counted by the API server's own audit log, not by the client):

1. The release controller as shipped (the official client through components.kube.client):
   API requests per release, by verb and resource, and its resident memory idle and under load.
2. One release's API sequence (read the node, remove its lock under the read's resourceVersion,
   mark the pod's bind-phase), the same in each client, each in a process of its own:
   - official, plain JSON: the official client as components.kube.client makes it, answers read
     as JSON (get_json, send: how the program uses it);
   - official, unread: the same, the writes' answers dropped unread (how the program used it
     before: each such answer keeps its connection, and the next request opens a new one);
   - official, models: the same client deserialising into its model classes;
   - lightkube: its typed client and models (when installed: requirements-dev.txt has it).
   Requests per release, resident memory after the import and at the end, wall and CPU time
   per release, and a list of N pods decoded.

Usage: bash tools/build.sh && .venv/bin/python bench/kube_client.py [pods] [releases] [listed]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NS, NODE, POD, LISTED_NS = "default", "bench-node", "bench-pod", "bench-list"
CLIENT_ACCOUNT = "bench-client"
LIST_REPEATS = 21
MODES = ("official-json", "official-unread", "official-models", "lightkube")

AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


def peak_rss_mib() -> float:
    """This process's high-water mark (VmHWM: getrusage's would keep the parent's across exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# --- one client, in its own process ------------------------------------------------------------


def worker(mode: str, releases: int, repeats: int) -> dict[str, float]:
    """Run in a fresh process: the kubeconfig on stdin, the figures as JSON on stdout."""
    from components.domain import hami_annotations as ha

    kubeconfig = sys.stdin.read()
    base = rss_mib()
    unlock = {"metadata": {"resourceVersion": "", "annotations": {ha.NODE_LOCK: None}}}
    done = {"metadata": {"annotations": {ha.BIND_PHASE: ha.PHASE_SUCCESS}}}
    if mode.startswith("official"):
        from components.kube.client import core_api, get_json, send

        core = core_api(kubeconfig)
        if mode in ("official-json", "official-unread"):

            def unread(call: Any, *args: Any) -> None:
                call(*args, _preload_content=False)  # the answer dropped unread, as the program did

            write = send if mode == "official-json" else unread

            def release() -> None:
                unlock["metadata"]["resourceVersion"] = get_json(core.read_node, NODE)["metadata"]["resourceVersion"]
                write(core.patch_node, NODE, unlock)
                write(core.patch_namespaced_pod, POD, NS, done)

            def listed() -> int:
                return len(get_json(core.list_namespaced_pod, LISTED_NS)["items"])
        else:

            def release() -> None:
                unlock["metadata"]["resourceVersion"] = core.read_node(NODE).metadata.resource_version
                core.patch_node(NODE, unlock)
                core.patch_namespaced_pod(POD, NS, done)

            def listed() -> int:
                return len(core.list_namespaced_pod(LISTED_NS).items)
    else:
        import yaml
        from lightkube import Client, KubeConfig
        from lightkube.resources.core_v1 import Node, Pod
        from lightkube.types import PatchType

        lk = Client(config=KubeConfig.from_dict(yaml.safe_load(kubeconfig)))

        def release() -> None:
            unlock["metadata"]["resourceVersion"] = lk.get(Node, NODE).metadata.resourceVersion
            lk.patch(Node, NODE, unlock, patch_type=PatchType.MERGE)
            lk.patch(Pod, POD, done, namespace=NS, patch_type=PatchType.MERGE)

        def listed() -> int:
            return len(list(lk.list(Pod, namespace=LISTED_NS, chunk_size=0)))

    release()  # the first connection, outside the timing
    loaded = rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(releases):
        release()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    list_ms, count = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        count = listed()
        list_ms.append((time.perf_counter() - started) * 1000)
    return {
        "import_and_client_mib": loaded - base,
        "release_wall_ms": wall / releases * 1000,
        "release_cpu_ms": cpu / releases * 1000,
        "list_ms": statistics.median(list_ms),
        "listed": count,
        "peak_rss_mib": peak_rss_mib(),
    }


def run_worker(mode: str, kubeconfig: str, releases: int, repeats: int) -> dict[str, Any]:
    """A fresh process per client, so the memory of one does not count for another."""
    out = subprocess.run(
        [sys.executable, __file__, "--worker", mode, str(releases), str(repeats)],
        input=kubeconfig, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["exit " + str(out.returncode)])[-1]}
    return json.loads(out.stdout)


# --- the audit log: what the API server was asked, by whom ---------------------------------------


def audit_events(path: Path, user: str, since: datetime, until: datetime) -> Counter[str]:
    """`verb resource` -> requests `user` sent between the two instants (whole requests: each is
    logged once, when its answer is complete)."""
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != user:
            continue
        at = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
        if since <= at <= until:
            ref = event.get("objectRef") or {}
            what = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            counts[f"{event['verb']} {what}"] += 1
    return counts


def breakdown(counts: Counter[str], per: int) -> str:
    return ", ".join(f"{what} {n / per:.2f}" for what, n in counts.most_common())


# --- the bench -----------------------------------------------------------------------------------


def controller_per_release(cluster: Any, audit: Path, pods: int) -> None:
    from kubernetes import client

    from components.config.model import GpuFleet
    from components.domain import hami_annotations as ha
    from components.kube.client import get_json
    from components.kube.waiting import wait_until
    from tests.support.gpu_pods import gpu_pod
    from tests.support.hami_stand_in import hami_bind
    from tests.support.real_hami import add_gpu_node
    from tests.support.release_account import USER, release_account
    from tests.support.release_process import controller_process

    core = cluster.core()
    l4x4 = GpuFleet.model_validate({"model": "L4", "cardsPerNode": 4})

    def all_released() -> bool:
        bound = [p for p in get_json(core.list_namespaced_pod, NS)["items"] if p["spec"].get("nodeName")]
        phases = [(p["metadata"].get("annotations") or {}).get(ha.BIND_PHASE) for p in bound]
        return len(phases) == pods and all(phase == ha.PHASE_SUCCESS for phase in phases)

    nodes = [f"release-{i}" for i in range(3)]
    for name in nodes:
        add_gpu_node(cluster, "bench", name, l4x4)
    with release_account(cluster, f"https://{cluster.endpoint}") as kubeconfig:
        with controller_process(kubeconfig) as (proc, _port):
            time.sleep(5)
            idle = proc.memory_info().rss / 2**20
            started = datetime.now(UTC)
            for i in range(pods):
                core.create_namespaced_pod(NS, gpu_pod(f"r{i}", 500, 1))
                node = nodes[i % len(nodes)]
                while ha.NODE_LOCK in (core.read_node(node).metadata.annotations or {}):
                    time.sleep(0.005)
                hami_bind(core, NS, f"r{i}", node)
            wait_until(all_released, timeout=600, interval=0.1, what=f"{pods} pods bound and released")
            loaded = proc.memory_info().rss / 2**20
            ended = datetime.now(UTC)
        core.delete_collection_namespaced_pod(NS, body=client.V1DeleteOptions(grace_period_seconds=0))
        time.sleep(1)
        startup = audit_events(audit, USER, datetime.min.replace(tzinfo=UTC), started)
        during = audit_events(audit, USER, started, ended)
    total = sum(during.values())
    print(f"1. The release controller as shipped (official client), {pods} pods bound by the stand-in on 3 nodes:")
    print(f"   {total / pods:.2f} API requests per release ({total} in all): {breakdown(during, pods)}")
    print(f"   at start (before any pod): {sum(startup.values())} requests: {breakdown(startup, 1)}")
    print(f"   resident memory: idle {idle:.0f} MiB, after the releases {loaded:.0f} MiB")


def client_account(cluster: Any) -> str:
    """A ServiceAccount of the bench's own (cluster-admin, in this throwaway cluster) and a
    kubeconfig with its token: its requests are told apart in the audit log by its name."""
    from components.kube.client import cluster_ca, token_kubeconfig

    core = cluster.core()
    core.create_namespaced_service_account(NS, {"metadata": {"name": CLIENT_ACCOUNT}})
    from kubernetes import client

    client.RbacAuthorizationV1Api(cluster.api_client()).create_cluster_role_binding(
        {
            "metadata": {"name": CLIENT_ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": CLIENT_ACCOUNT, "namespace": NS}],
        }
    )
    token = core.create_namespaced_service_account_token(
        CLIENT_ACCOUNT, NS, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    return token_kubeconfig(f"https://{cluster.endpoint}", cluster_ca(cluster.kubeconfig_text), token)


def clients_side_by_side(cluster: Any, audit: Path, releases: int, listed: int) -> None:
    from kubernetes import client

    from tests.support.cluster import add_node
    from tests.support.gpu_pods import gpu_pod

    core = cluster.core()
    add_node(cluster, NODE)
    core.create_namespaced_pod(NS, client.V1Pod(metadata=client.V1ObjectMeta(name=POD), spec=client.V1PodSpec(
        containers=[client.V1Container(name="c", image="busybox")])))  # fmt: skip
    core.create_namespace({"metadata": {"name": LISTED_NS}})
    made = threading.Semaphore(8)

    def create(i: int) -> None:
        with made:
            core.create_namespaced_pod(LISTED_NS, gpu_pod(f"p{i}", 2000, 10))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(listed)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kubeconfig = client_account(cluster)
    user = f"system:serviceaccount:{NS}:{CLIENT_ACCOUNT}"
    results: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        since = datetime.now(UTC)
        results[mode] = run_worker(mode, kubeconfig, releases, LIST_REPEATS)
        time.sleep(1)
        results[mode]["requests"] = audit_events(audit, user, since, datetime.now(UTC))
    print(
        f"2. One release's API sequence, {releases} times, then a list of {listed} pods "
        f"{LIST_REPEATS} times (median), each client alone:"
    )
    rows = []
    for mode, r in results.items():
        if "error" in r:
            rows.append(f"   {mode:16} not run: {r['error']}")
            continue
        counted = r["requests"]
        per_release = sum(n for what, n in counted.items() if not what.startswith("list")) / (releases + 1)
        rows.append(
            f"   {mode:16} {per_release:.2f} requests/release ({breakdown(counted, releases + 1)}); "
            f"import+client {r['import_and_client_mib']:.1f} MiB, peak RSS {r['peak_rss_mib']:.0f} MiB; "
            f"release {r['release_wall_ms']:.1f} ms wall, {r['release_cpu_ms']:.2f} ms CPU; "
            f"list of {r['listed']} pods {r['list_ms']:.0f} ms"
        )
    print("\n".join(rows))
    base = results["official-json"]
    for mode in MODES[1:]:
        r = results[mode]
        if "error" not in r:
            print(
                f"   {mode} / official-json: peak RSS {r['peak_rss_mib'] / base['peak_rss_mib']:.2f}, "
                f"CPU per release {r['release_cpu_ms'] / base['release_cpu_ms']:.2f}, "
                f"list {r['list_ms'] / base['list_ms']:.2f}"
            )


def main(pods: int = 30, releases: int = 300, listed: int = 500) -> None:
    from tests.support.cluster import start_cluster
    from tests.support.tools import tools_env

    with tempfile.TemporaryDirectory(prefix="kube-client-bench-") as tmp:
        policy, audit = Path(tmp) / "policy.yaml", Path(tmp) / "audit.log"
        policy.write_text(AUDIT_POLICY)
        cluster = start_cluster(
            tools_env(),
            api_args=[f"--audit-policy-file={policy}", f"--audit-log-path={audit}", "--audit-log-format=json"],
        )
        try:
            controller_per_release(cluster, audit, pods)
            clients_side_by_side(cluster, audit, releases, listed)
        finally:
            cluster.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main(*(int(a) for a in sys.argv[1:4]))
