"""The resident memory of each controller container a tenant runs on the lab's host, against a
real kube-apiserver, beside the cap its container gets (so one tenant's controller cannot take
the host's memory from the others):

- the token keeper (components.kube.bound_token) on its own ServiceAccount: idle (it serves the
  stack's token until two thirds of its life, an hour here), and a renewal's peak (one
  TokenRequest through the client, in a fresh process, as the keeper makes it);
- KWOK (built by tools/build.sh) on its least-privilege token, with N simulated nodes of 8 A100s
  made as the stack makes them (lifecycle.simulated_nodes), all Ready.

The release controller's own figures come from bench/kube_client.py.

Usage: bash tools/build.sh && .venv/bin/python bench/controller_memory.py [nodes,nodes,...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from components.config.model import GpuFleet  # noqa: E402
from components.kube.waiting import wait_until  # noqa: E402
from components.lifecycle.simulated_nodes import ensure_nodes, pool_nodes  # noqa: E402
from components.tenant import kwok_controller  # noqa: E402
from tests.support.cluster import TestCluster, start_cluster  # noqa: E402
from tests.support.kwok import start_kwok  # noqa: E402
from tests.support.release_account import release_account  # noqa: E402
from tests.support.tools import tools_env  # noqa: E402

A100X8 = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 8})


def renewal_peak_mib(kubeconfig: str) -> float:
    """VmHWM of a fresh process that renews the account's token once, as the keeper does."""
    code = (
        "import sys\n"
        "from components.kube import bound_token as bt\n"
        "from components.kube.client import core_api\n"
        "kubeconfig = sys.stdin.read()\n"
        "namespace, account = bt.account_of(bt.current_context(kubeconfig).user['token'])\n"
        "bt.request_token(core_api(kubeconfig), namespace, account, bt.CONTROLLER_SECONDS)\n"
        "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=kubeconfig, capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    return int(out.stdout.split()[-1]) / 1024


def keeper_mib(cluster: TestCluster) -> tuple[float, float]:
    with release_account(cluster, f"https://{cluster.endpoint}") as kubeconfig, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubeconfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(kubeconfig)
        token = Path(tmp) / "token"
        proc = subprocess.Popen(
            [sys.executable, "-m", "components.kube.bound_token", "--kubeconfig", str(path),
             "--token-file", str(token), "--interval", "1"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        try:
            wait_until(lambda: token.exists() and token.stat().st_size > 0, timeout=60, what="the keeper's token file")
            time.sleep(10)
            return psutil.Process(proc.pid).memory_info().rss / 2**20, renewal_peak_mib(kubeconfig)
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def ready_count(core: Any, names: set[str]) -> int:
    ready = 0
    for node in core.list_node(label_selector="type=kwok").items:
        conditions = {c.type: c.status for c in node.status.conditions or []}
        ready += node.metadata.name in names and conditions.get("Ready") == "True"
    return ready


def kwok_mib(cluster: TestCluster, sizes: list[int]) -> list[tuple[int, float]]:
    proc, _port = start_kwok(cluster)
    process = psutil.Process(proc.pid)
    core = cluster.core()
    out = []
    time.sleep(5)
    out.append((0, process.memory_info().rss / 2**20))
    for n in sizes:
        names = [f"sim-{i}" for i in range(n)]
        ensure_nodes(core, names, "bench", "pool", A100X8)
        assert len(pool_nodes(core, "bench", "pool")) == n
        wanted = set(names)
        wait_until(
            lambda wanted=wanted: ready_count(core, wanted) == len(wanted), timeout=900, interval=2, what="nodes Ready"
        )
        time.sleep(10)
        out.append((n, process.memory_info().rss / 2**20))
    return out


def main(sizes: str = "500,2000") -> None:
    from components.tenant import release_controller

    cluster = start_cluster(tools_env())
    try:
        keeper = keeper_mib(cluster)
        kwok = kwok_mib(cluster, [int(n) for n in sizes.split(",")])
    finally:
        cluster.stop()
    cap = kwok_controller.KEEPER_MEMORY_MIB
    print(f"token keeper: idle {keeper[0]:.0f} MiB resident, a renewal's peak {keeper[1]:.0f} MiB; "
          f"cap {cap} MiB ({cap / keeper[1]:.1f}x the peak)")  # fmt: skip
    for n, mib in kwok:
        print(f"KWOK with {n:>5} Ready nodes of 8 A100: {mib:.0f} MiB resident; cap {kwok_controller.MEMORY_MIB} MiB "
              f"({kwok_controller.MEMORY_MIB / mib:.1f}x)")  # fmt: skip
    print(f"release controller: cap {release_controller.MEMORY_MIB} MiB (its figures: bench/kube_client.py)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
