"""The lab's node image: what it costs to build, and what a node costs to start, join and run.

1. Build: `tools/images/build.sh node --kubernetes V` with `--cold` in empty caches of its own
   (tools cache, Go module and build caches: everything downloaded and compiled again), else the
   cached build; its seconds and the image's size.
2. Nodes: a real control plane (the Docker tier's: kube-apiserver and kube-controller-manager
   given what Kamaji gives a joining node) and N node containers joined one after another by the
   project's own join (WorkerNode's JOIN, BootstrapToken, NodeMembership). Per node: container start
   to containerd up, the join (kubeadm join), container start to Node Ready; and the peak memory
   of each node container while the nodes join and a pod runs on each (docker stats every 0.5 s).
Printed per node, then medians, with each phase's share of start-to-Ready.
The host's kernel tunables are kept put back throughout (tools/lab/tunables-guard.sh).

Usage: bash tools/build.sh && .venv/bin/python bench/node_image.py [--nodes 3] [--cold] [--version V]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.config.versions import DEFAULT_TENANT_VERSION, LAB_NODE_REPOSITORY  # noqa: E402
from tests.support.docker_lab import BUSYBOX, DockerLab, MemorySampler, TunablesGuard, docker, ensure_engine  # noqa: E402
from tests.support.lab_join import join_worker, node_ready, start_control_plane  # noqa: E402
from tests.support.tools import tools_env  # noqa: E402
from tests.support.waits import settles  # noqa: E402


def build(version: str, cold: bool) -> float:
    env = dict(os.environ)
    if cold:
        tmp = Path(tempfile.mkdtemp(prefix="node-image-cold-"))
        env.update(GPU_TENANCY_CACHE=str(tmp / "cache"), GOMODCACHE=str(tmp / "mod"), GOCACHE=str(tmp / "build"))
    start = time.monotonic()
    subprocess.run(["bash", str(ROOT / "tools/images/build.sh"), "node", "--kubernetes", version], env=env, check=True)
    seconds = time.monotonic() - start
    if cold:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return seconds


def sleeper(name: str, node: str) -> dict:
    container = {"name": "sleep", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
    return {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [container]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="build in empty caches (downloads and compiles all)")
    parser.add_argument("--version", default=DEFAULT_TENANT_VERSION)
    args = parser.parse_args()
    ensure_engine_or_exit()
    image = f"{LAB_NODE_REPOSITORY}:{args.version}"
    build_seconds = build(args.version, args.cold)
    size_mb = int(docker("image", "inspect", "--format", "{{.Size}}", image)) / 1e6
    print(f"node image {image}: build {build_seconds:.0f} s ({'cold' if args.cold else 'cached'}), {size_mb:.0f} MB")

    guard = TunablesGuard()
    lab = DockerLab().open()
    rows = []
    try:
        cluster = start_control_plane(tools_env(), lab, image)
        core = cluster.core()
        sampler = MemorySampler(lab)
        for i in range(args.nodes):
            t0 = time.monotonic()
            node = lab.start_node(f"bench-{i}", image)
            settles(
                lambda node=node: lab.exec(node, "systemctl", "is-active", "containerd", check=False) == "active",
                timeout=120,
                interval=0.2,
            )
            runtime = time.monotonic() - t0
            joined = join_worker(cluster, lab, node)
            settles(lambda node=node: node_ready(core, node), timeout=180, interval=0.2)
            ready = time.monotonic() - t0
            rows.append((node, runtime, joined.join_seconds, ready))
        for node, *_ in rows:  # a pod on each node, then 10 s of settled nodes for the memory figure
            name = f"sleep-{node.rsplit('-', 1)[1]}"
            core.create_namespaced_pod("default", sleeper(name, node))
            settles(lambda name=name: core.read_namespaced_pod(name, "default").status.phase == "Running", timeout=120)
        time.sleep(10)
        peaks = sampler.stop()
        cluster.stop()
    finally:
        lab.close()
        guard.stop()
    print(f"{'node':<14} {'containerd up s':>16} {'join s':>8} {'start to Ready s':>17} {'peak MiB':>9}")
    for node, runtime, join, ready in rows:
        print(f"{node.split('-', 2)[2]:<14} {runtime:>16.1f} {join:>8.1f} {ready:>17.1f} {peaks.get(node, 0):>9.0f}")
    med = [statistics.median(col) for col in zip(*[r[1:] for r in rows], strict=True)]
    peak = statistics.median(peaks.values()) if peaks else 0.0
    print(f"{'median':<14} {med[0]:>16.1f} {med[1]:>8.1f} {med[2]:>17.1f} {peak:>9.0f}")
    print(
        f"share of start-to-Ready: containerd up {med[0] / med[2]:.0%}, join {med[1] / med[2]:.0%}, "
        f"the rest (kubelet to Ready) {(med[2] - med[0] - med[1]) / med[2]:.0%}"
    )
    print(f"kernel tunables put back {len(guard.restored)} times during the run")


def ensure_engine_or_exit() -> None:
    try:
        ensure_engine()
    except BaseException as exc:  # noqa: BLE001 - pytest's skip outside pytest: say it and stop
        sys.exit(f"bench/node_image.py: {exc}")


if __name__ == "__main__":
    main()
