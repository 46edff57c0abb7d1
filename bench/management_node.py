"""The lab's image set and its management node: what the set costs to build, and what the node
costs to start and run.

1. Build: `tools/images/build.sh all` (every image the lab runs, at every pinned version), with
   `--cold` in empty caches of its own (tools cache, Go module and build caches, debootstrap
   rootfs: everything downloaded and compiled again) and `--rebuild` (the engine's images of the
   set, found by their input keys, built again), else the cached build; the script's own
   summary (each image's seconds and size) and the total seconds and MB.
2. The management node as the stack starts it (components.nodes.management_node, through the
   Docker tier's support): a registry on the Docker bridge filled with the images it pulls, the
   node container, `kubeadm init`, Node Ready; then CoreDNS and the local-path provisioner
   running. Printed: container made to init done, to Ready, to the provisioner available; the
   node's peak memory over all of it (docker stats every 0.5 s) and its memory at rest.
The host's kernel tunables are kept put back throughout (tools/lab/tunables-guard.sh).

Usage: bash tools/build.sh && .venv/bin/python bench/management_node.py [--cold] [--skip-build]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.config.versions import MANAGEMENT_KUBERNETES_VERSION  # noqa: E402
from components.nodes import local_path  # noqa: E402
from tests.support.docker_lab import DockerLab, MemorySampler, TunablesGuard, ensure_engine  # noqa: E402
from tests.support.management import apply_storage, pulled_images, start_management  # noqa: E402
from tests.support.registry import bridge_gateway, lab_registry, push  # noqa: E402
from tests.support.waits import settles  # noqa: E402


def build(cold: bool) -> tuple[float, list[str]]:
    """`build.sh all`: its seconds and its summary lines (the script's stderr from the summary on)."""
    env = dict(os.environ)
    tmp = None
    if cold:
        tmp = Path(tempfile.mkdtemp(prefix="image-set-cold-"))
        env.update(GPU_TENANCY_CACHE=str(tmp / "cache"), GOMODCACHE=str(tmp / "mod"), GOCACHE=str(tmp / "build"))
    start = time.monotonic()
    command = ["bash", str(ROOT / "tools/images/build.sh"), "all", *(["--rebuild"] if cold else [])]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if tmp is not None:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    if proc.returncode != 0:
        sys.exit(f"tools/images/build.sh all exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    lines = proc.stderr.splitlines()
    summary = next((i for i, line in enumerate(lines) if "summary" in line.lower()), len(lines) - 20)
    return seconds, lines[max(summary, 0) :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="build in empty caches (downloads and compiles all)")
    parser.add_argument("--skip-build", action="store_true", help="use the images the engine has")
    args = parser.parse_args()
    ensure_engine()
    if not args.skip_build:
        seconds, summary = build(args.cold)
        print(f"image set: tools/images/build.sh all {seconds:.0f} s ({'cold' if args.cold else 'cached'})")
        print("\n".join(summary))

    images = pulled_images()
    guard = TunablesGuard()
    lab = DockerLab().open()
    try:
        with lab_registry(Path(tempfile.mkdtemp(prefix="management-bench-registry-")), bridge_gateway()) as reg:
            pushed = push(reg, *images)
            print(f"mirror: {len(images)} images pushed in {pushed:.0f} s")
            sampler = MemorySampler(lab)
            start = time.monotonic()
            m = start_management(lab, f"gpu-tenancy/node:{MANAGEMENT_KUBERNETES_VERSION}", reg.endpoint)
            apply_storage(m)
            from kubernetes import client

            apps = client.AppsV1Api(m.client())

            def available() -> bool:
                d = apps.read_namespaced_deployment("local-path-provisioner", local_path.NAMESPACE)
                c = apps.read_namespaced_deployment("coredns", "kube-system")
                return (d.status.available_replicas or 0) >= 1 and (c.status.available_replicas or 0) >= 1

            settled = settles(available, timeout=300, interval=1)
            storage_seconds = time.monotonic() - start
            time.sleep(20)
            peak = sampler.stop().get(m.node, 0.0)
            rest = lab.memory_mib(m.node)
            print(
                f"management node (kubeadm {MANAGEMENT_KUBERNETES_VERSION}): init done {m.init_seconds:.0f} s, "
                f"Ready {m.ready_seconds:.0f} s, CoreDNS and storage "
                f"{f'{storage_seconds:.0f} s' if settled else 'not available within 300 s'} after the container "
                f"was made; memory peak {peak:.0f} MiB, at rest {rest:.0f} MiB "
                f"({rest / peak:.2f} of the peak)"
            )
    finally:
        lab.close()
        guard.stop()
        print(f"kernel tunables put back {len(guard.restored)} times")


if __name__ == "__main__":
    main()
