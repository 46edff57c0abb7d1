"""kwok pools at fleet scale: one tenant with a kwok pool of 100, 300 and 1,000 simulated A100
nodes (8 cards each), on a real kube-apiserver with KWOK, kube-controller-manager and
kube-scheduler (HAMi's placement is the real-HAMi tier's: HAMi at 1,000 nodes is not benched).

Per size:
1. `pulumi up` of the pool through the real engine (SimulatedNodes: the nodes with their
   inventory - register annotation, labels, capacity): wall time and peak memory of the whole
   pulumi process tree (CLI, language host, program, providers), then until KWOK has every
   node Ready;
2. 5,000 GPU pods (8000 MB / 10 % each) created at once: seconds until every pod is placed
   (bound to a node) and until KWOK shows every one Running;
3. the pods deleted, `pulumi destroy`: wall time and peak memory; no node of the pool left.
Printed with the growth factor per step beside the node-count factor (linear = equal).

Usage: bash tools/build.sh && .venv/bin/python bench/kwok_pools.py [sizes...] [--pods N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from components.domain import hami_annotations as ha  # noqa: E402
from components.kube.client import core_api  # noqa: E402
from components.lifecycle.simulated_nodes import selector  # noqa: E402
from tests.support.cluster import start_cluster  # noqa: E402
from tests.support.kwok import start_kwok, wait_for  # noqa: E402
from tests.support.tools import PulumiCli, tools_env  # noqa: E402

PROGRAM = ROOT / "tests" / "integration" / "programs" / "kwok_pool"
CARDS = 8


def run_measured(cli: PulumiCli, args: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds, peak MiB of the process tree's summed RSS) of one pulumi command."""
    start = time.monotonic()
    proc = subprocess.Popen(
        ["pulumi", *args, "--non-interactive"], cwd=cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            break
        peak = max(peak, total)
        time.sleep(0.1)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"pulumi {' '.join(args)} failed:\n{out}")
    return time.monotonic() - start, peak / 2**20


def gpu_pod(name: str) -> dict:
    limits = {ha.RES_GPUMEM: "8000", ha.RES_GPUCORES: "10"}
    return {
        "metadata": {"name": name, "labels": {"bench": "kwok"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
    }


def one_size(nodes: int, pods: int, env: dict[str, str]) -> dict[str, float]:
    cluster = start_cluster(env, ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"])
    work = Path(tempfile.mkdtemp(prefix="gpu-tenancy-bench-kwok-"))
    try:
        cluster.start_controller_manager(["nodelifecycle", "podgc", "deployment", "replicaset", "garbagecollector"])
        cluster.start_scheduler()
        start_kwok(cluster, "10.0.0.0/12")
        state = work / "state"
        state.mkdir()
        cli = PulumiCli(env, state)
        program = cli.new_stack(PROGRAM, work / "program", cluster.kubeconfig_text, stack="bench")
        for key, value in {"tenant": "team-a", "model": "A100-80GB", "cardsPerNode": str(CARDS)}.items():
            cli("config", "set", key, value, cwd=program)
        cli("config", "set", "nodes", str(nodes), cwd=program)
        cli("config", "set", "replicas", "0", cwd=program)
        core = core_api(cluster.kubeconfig_text, timeout=(5, 120), connections=32)

        t0 = time.monotonic()
        up_s, up_mib = run_measured(cli, ["up", "--yes", "--skip-preview"], program)

        def all_ready() -> bool:
            items = core.list_node(label_selector=selector("team-a", "sim")).items
            ready = [
                n for n in items if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            ]
            untainted = [n for n in ready if not n.spec.taints]
            return len(untainted) == nodes

        wait_for(all_ready, 600, f"{nodes} nodes Ready", interval=1)
        ready_s = time.monotonic() - t0

        t1 = time.monotonic()
        with ThreadPoolExecutor(32) as ex:
            list(
                ex.map(
                    lambda i: core.create_namespaced_pod("default", gpu_pod(f"p-{i}"), _preload_content=False),
                    range(pods),
                )
            )
        created_s = time.monotonic() - t1

        def count(field: str) -> int:
            items = core.list_namespaced_pod("default", label_selector="bench=kwok").items
            if field == "bound":
                return sum(1 for p in items if p.spec.node_name)
            return sum(1 for p in items if p.status.phase == "Running")

        wait_for(lambda: count("bound") == pods, 1800, f"{pods} pods placed", interval=1)
        placed_s = time.monotonic() - t1
        wait_for(lambda: count("running") == pods, 1800, f"{pods} pods Running", interval=1)
        running_s = time.monotonic() - t1

        core.delete_collection_namespaced_pod("default", label_selector="bench=kwok", grace_period_seconds=0)
        wait_for(
            lambda: not core.list_namespaced_pod("default", label_selector="bench=kwok").items, 600, "pods gone", 1
        )
        down_s, down_mib = run_measured(cli, ["destroy", "--yes", "--skip-preview"], program)
        left = len(core.list_node(label_selector=selector("team-a", "sim")).items)
        if left:
            raise SystemExit(f"destroy left {left} nodes")
        return {
            "up_s": up_s,
            "up_mib": up_mib,
            "ready_s": ready_s,
            "create_s": created_s,
            "placed_s": placed_s,
            "running_s": running_s,
            "destroy_s": down_s,
            "destroy_mib": down_mib,
        }
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300, 1000])
    parser.add_argument("--pods", type=int, default=5000)
    args = parser.parse_args()
    env = tools_env()
    os.environ.setdefault("PULUMI_SKIP_UPDATE_CHECK", "true")
    results = []
    for n in args.sizes:
        r = one_size(n, args.pods, env)
        results.append((n, r))
        print(
            f"{n:>5} nodes x {CARDS} A100: up {r['up_s']:.1f} s (peak {r['up_mib']:.0f} MiB), all Ready "
            f"{r['ready_s']:.1f} s; {args.pods} pods created {r['create_s']:.1f} s, placed {r['placed_s']:.1f} s, "
            f"Running {r['running_s']:.1f} s; destroy {r['destroy_s']:.1f} s (peak {r['destroy_mib']:.0f} MiB)",
            flush=True,
        )
    print("\ngrowth per step (node factor beside each measure's factor; linear = equal):")
    keys = ("up_s", "up_mib", "ready_s", "placed_s", "running_s", "destroy_s", "destroy_mib")
    print("step | nodes x | " + " | ".join(keys))
    for (n0, r0), (n1, r1) in zip(results, results[1:], strict=False):
        factors = " | ".join(f"{r1[k] / r0[k]:.2f}" for k in keys)
        print(f"{n0} -> {n1} | {n1 / n0:.2f} | {factors}")


if __name__ == "__main__":
    main()
