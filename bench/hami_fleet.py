"""HAMi's real scheduler on a simulated fleet: how fast GPU pods are bound, and what limits it.

A real kube-apiserver with KWOK keeping a kwok pool of simulated nodes (8 x A100 each, the
project's own inventory) Ready; HAMi's scheduler (HAMI_SCHEDULER) with kube-scheduler as the chart
runs them; the release controller as the lab runs it (its own process). Per fleet size and pod
count, P pods of 20000 MB / 30 % are created at once, and the bench measures the seconds until
every pod is bound with bind-phase success (pods/s), checks that no card holds more than 3 of
them and that no node lock is left, for:
- `kube-scheduler`: the default scheduler alone on the same fleet (no HAMi, no slices per card:
  the floor any HAMi setting is compared with);
- `chart`: HAMi with the chart's own defaults (--kube-qps 5, -v=4, binpack);
- `stack`: HAMi with the stack's values (components.config.model.HamiConfig, `--set` to vary).
Evidence of what limits each run: HAMi's client-side throttling waits (from its log), the API
server's request rate by verb and resource (its /metrics), and the CPU each process used.

Usage: bash tools/build.sh && HAMI_SCHEDULER=... .venv/bin/python bench/hami_fleet.py \
    [--fleet 100:300 --fleet 1000:300 --fleet 1000:5000] [--modes kube-scheduler,chart,stack] \
    [--set nodeSchedulerPolicy=binpack] [--cap 1500] [--chart-cap 600] [--profile 30]
"""

from __future__ import annotations

import argparse
import json
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from components.config.model import GpuFleet, HamiConfig  # noqa: E402
from components.domain import hami_annotations as ha  # noqa: E402
from components.domain.inventory import node_devices  # noqa: E402
from components.kube.client import core_api  # noqa: E402
from components.lifecycle.simulated_nodes import ensure_nodes, selector  # noqa: E402
from tests.support.cluster import TOKEN, TestCluster, start_cluster  # noqa: E402
from tests.support.kwok import start_kwok, wait_for  # noqa: E402
from tests.support.real_hami import RealHami, binary  # noqa: E402
from tests.support.release_process import controller_process  # noqa: E402
from tests.support.tools import tools_env  # noqa: E402

FLEET = GpuFleet.model_validate({"model": "A100-80GB", "cardsPerNode": 8})
TENANT, POOL = "team-a", "sim"
MEM, CORES, PER_CARD = 20000, 30, 3
LABEL = "bench=fleet"


@dataclass
class Run:
    nodes: int
    pods: int
    mode: str
    bound: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    max_per_card: int = 0
    locks_left: int = 0
    throttled: int = 0
    throttled_s: float = 0.0
    log_lines: int = 0
    requests: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.bound / self.seconds if self.seconds else 0.0


def gpu_pod(name: str, hami: bool) -> dict[str, Any]:
    labels = dict([LABEL.split("=")])
    if not hami:  # HAMi's webhook skips it: the default scheduler places it on node capacity
        labels["hami.io/webhook"] = "ignore"
    limits = {ha.RES_GPUMEM: str(MEM), ha.RES_GPUCORES: str(CORES)}
    if not hami:
        limits[ha.RES_GPU] = "1"
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
    }


def api_requests(cluster: TestCluster) -> Counter[str]:
    """apiserver_request_total by verb and resource, from the API server's /metrics."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(
        f"https://127.0.0.1:{cluster.port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    text = urllib.request.urlopen(req, context=ctx, timeout=30).read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") == "WATCH":
            continue
        what = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        out[f"{labels.get('verb')} {what}"] += float(line.rsplit(" ", 1)[1])
    return out


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, p in procs.items():
        try:
            t = p.cpu_times()
            out[name] = t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            out[name] = 0.0
    return out


def _name(proc: Any) -> str:
    argv = [str(a) for a in proc.args]
    exe = Path(argv[0]).name
    if exe == "kube-scheduler":
        return "kube-scheduler (HAMi's)" if any(a.startswith("--config=") for a in argv) else "kube-scheduler"
    if any(a.startswith("--http_bind") for a in argv):
        return "HAMi extender"
    return exe


def fleet(nodes: int, env: dict[str, str]) -> tuple[TestCluster, list[str]]:
    cluster = start_cluster(env, ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"])
    cluster.start_controller_manager(["nodelifecycle"])
    cluster.start_scheduler()
    start_kwok(cluster, "10.0.0.0/12")
    names = [f"lab-{TENANT}-{POOL}-{i}" for i in range(nodes)]
    ensure_nodes(core_api(cluster.kubeconfig_text, connections=16), names, TENANT, POOL, FLEET)
    core = core_api(cluster.kubeconfig_text, timeout=(5, 120))

    def ready() -> bool:
        items = core.list_node(label_selector=selector(TENANT, POOL)).items
        return sum(1 for n in items if not n.spec.taints and n.status.conditions) == nodes

    wait_for(ready, 900, f"{nodes} nodes Ready", interval=2)
    return cluster, names


def profile(hami: RealHami, seconds: int, out: Path) -> None:
    """HAMi's own CPU profile (its --profiling pprof route) for `seconds`, printed by go tool pprof."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    url = f"https://127.0.0.1:{hami.port}/debug/pprof/profile?seconds={seconds}"
    out.write_bytes(urllib.request.urlopen(url, context=ctx, timeout=seconds + 60).read())
    top = subprocess.run(
        ["go", "tool", "pprof", "-top", "-nodecount=25", hami.path, str(out)], capture_output=True, text=True
    )
    print(f"HAMi CPU profile ({seconds} s, {out}):\n{top.stdout}{top.stderr}", flush=True)


def measure(
    cluster: TestCluster, names: list[str], run: Run, cap: float, hami: RealHami | None, profile_s: int = 0
) -> None:
    core = core_api(cluster.kubeconfig_text, timeout=(5, 120), connections=32)
    procs = {_name(p): psutil.Process(p.pid) for p in cluster.procs if p.poll() is None}
    with controller_process(cluster.kubeconfig_text, "--workers", "4") as (controller, _port):
        procs["release controller"] = controller
        before_req, before_cpu = api_requests(cluster), cpu_seconds(procs)
        t0 = time.monotonic()
        with ThreadPoolExecutor(32) as ex:
            list(ex.map(lambda i: core.create_namespaced_pod("default", gpu_pod(f"f-{i}", hami is not None),
                                                              _preload_content=False), range(run.pods)))  # fmt: skip

        def done() -> int:
            items = json.loads(core.list_namespaced_pod("default", label_selector=LABEL, _preload_content=False).data)
            ok = 0
            for p in items["items"]:
                bound = p["spec"].get("nodeName")
                phase = (p["metadata"].get("annotations") or {}).get(ha.BIND_PHASE)
                ok += bool(bound and (hami is None or phase == ha.PHASE_SUCCESS))
            return ok

        profiler = None
        while (bound := done()) < run.pods and time.monotonic() - t0 < cap:
            if hami is not None and profile_s and profiler is None and bound >= run.pods // 2:
                out = hami.logdir / "cpu.pprof"
                profiler = threading.Thread(target=profile, args=(hami, profile_s, out), daemon=True)
                profiler.start()
            time.sleep(1)
        if profiler is not None:
            profiler.join(profile_s + 120)
        run.seconds, run.bound, run.timed_out = time.monotonic() - t0, bound, bound < run.pods
        after_req, after_cpu = api_requests(cluster), cpu_seconds(procs)
    run.requests = {k: (after_req[k] - before_req.get(k, 0)) / run.seconds for k in after_req}
    run.cpu = {k: 100 * (after_cpu[k] - before_cpu.get(k, 0)) / run.seconds for k in after_cpu}
    if hami is not None:
        cards: Counter[str] = Counter()
        items = json.loads(core.list_namespaced_pod("default", label_selector=LABEL, _preload_content=False).data)
        for p in items["items"]:
            allocated = (p["metadata"].get("annotations") or {}).get(ha.DEVICES_ALLOCATED)
            for container in ha.decode_pod_devices(allocated) if allocated else []:
                for device in container:
                    cards[device.uuid] += 1
        run.max_per_card = max(cards.values(), default=0)
        nodes = json.loads(core.list_node(label_selector=selector(TENANT, POOL), _preload_content=False).data)
        run.locks_left = sum(1 for n in nodes["items"] if ha.NODE_LOCK in (n["metadata"].get("annotations") or {}))
        log = (hami.logdir / "hami-scheduler.log").read_text(errors="replace")
        waits = re.findall(r"Waited for ([0-9.]+)(ms|s) due to client-side throttling", log)
        run.throttled = len(waits)
        run.throttled_s = sum(float(v) / (1000 if unit == "ms" else 1) for v, unit in waits)
        run.log_lines = log.count("\n")
    print(report(run, {}), flush=True)  # before the clean-up, which may take a while


def clean_up(cluster: TestCluster) -> None:
    """Delete the pods one by one (a delete-collection of thousands outlasts the API server's
    request timeout) and every lock a cut run left, so the next run starts clean."""
    core = core_api(cluster.kubeconfig_text, timeout=(5, 120), connections=32)

    def pods() -> list[str]:
        items = json.loads(core.list_namespaced_pod("default", label_selector=LABEL, _preload_content=False).data)
        return [p["metadata"]["name"] for p in items["items"]]

    def delete(name: str) -> None:
        try:
            core.delete_namespaced_pod(name, "default", grace_period_seconds=0, _preload_content=False)
        except Exception:  # gone already, or retried on the next round
            pass

    while left := pods():
        with ThreadPoolExecutor(32) as ex:
            list(ex.map(delete, left))
        time.sleep(2)
    nodes = json.loads(core.list_node(label_selector=selector(TENANT, POOL), _preload_content=False).data)
    for n in nodes["items"]:  # a run cut by the cap may leave locks behind: never into the next run
        if ha.NODE_LOCK in (n["metadata"].get("annotations") or {}):
            unlock = {"metadata": {"annotations": {ha.NODE_LOCK: None}}}
            core.patch_node(n["metadata"]["name"], unlock, _preload_content=False)


def one_mode(
    cluster: TestCluster, names: list[str], run: Run, cap: float, stack: HamiConfig, path: str, profile_s: int
) -> Run:
    if run.mode == "kube-scheduler":
        measure(cluster, names, run, cap, None)
        clean_up(cluster)
        return run
    flags = ["--profiling"] if profile_s else []
    hami = RealHami(cluster, path, hami=stack, chart_defaults=run.mode == "chart", extra_flags=flags).start()
    try:
        expected = {n: [d.id for d in node_devices(TENANT, n, FLEET)] for n in names}
        t0 = time.monotonic()
        hami.wait_registered(expected, timeout=900)
        print(f"  HAMi registered {8 * len(names)} cards in {time.monotonic() - t0:.0f} s", flush=True)
        measure(cluster, names, run, cap, hami, profile_s)
    finally:
        hami.stop()
    clean_up(cluster)
    return run


def report(run: Run, baseline: dict[tuple[int, int], Run]) -> str:
    base = baseline.get((run.nodes, run.pods))
    ratio = f"{run.rate / base.rate:.2f}" if base and base.rate and run.mode != "kube-scheduler" else "-"
    top = sorted(run.requests.items(), key=lambda kv: -kv[1])[:4]
    cpu = ", ".join(f"{k} {v:.0f}%" for k, v in sorted(run.cpu.items(), key=lambda kv: -kv[1]) if v >= 5)
    return (
        f"| {run.nodes} | {run.pods} | {run.mode} | {run.bound}/{run.pods}{' (cut)' if run.timed_out else ''} | "
        f"{run.seconds:.0f} | {run.rate:.1f} | {ratio} | {run.max_per_card or '-'} | {run.locks_left} | "
        f"{run.throttled} ({run.throttled_s:.0f} s) | {sum(run.requests.values()):.0f}: "
        + ", ".join(f"{k} {v:.0f}" for k, v in top)
        + f" | {cpu} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", action="append", help="NODES:PODS (repeatable)")
    parser.add_argument("--modes", default="kube-scheduler,chart,stack")
    parser.add_argument("--set", action="append", default=[], help="a HamiConfig key=value for the stack mode")
    parser.add_argument("--cap", type=float, default=1500, help="seconds a run may take before it is cut")
    parser.add_argument("--chart-cap", type=float, default=600, help="the same for the chart's defaults (~0.4 pods/s)")
    parser.add_argument("--profile", type=int, default=0, help="seconds of HAMi CPU profile, from half the pods on")
    args = parser.parse_args()
    path = binary()
    modes = args.modes.split(",")
    if path is None and modes != ["kube-scheduler"]:
        raise SystemExit("set HAMI_SCHEDULER to a HAMi scheduler binary (cmd/scheduler of Project-HAMi/HAMi)")
    overrides = dict(kv.split("=", 1) for kv in args.set)
    stack = HamiConfig.model_validate({k: int(v) if v.isdigit() else v for k, v in overrides.items()})
    sizes: dict[int, list[int]] = {}
    for spec in args.fleet or ["100:300", "1000:300", "1000:5000"]:
        nodes, pods = (int(x) for x in spec.split(":"))
        if pods > nodes * 8 * PER_CARD:
            raise SystemExit(f"{pods} pods of {CORES} % do not fit {nodes} nodes x 8 cards")
        sizes.setdefault(nodes, []).append(pods)
    print(f"HAMi: {path or '-'}; stack values: {stack.model_dump(by_alias=True)}", flush=True)
    env = tools_env()
    runs: list[Run] = []
    baseline: dict[tuple[int, int], Run] = {}
    header = (
        "| nodes | pods | mode | bound | s | pods/s | / kube-scheduler | max per card | locks left | "
        "HAMi throttled (waited) | API req/s: top | CPU (of 200 %) |\n|" + " --- |" * 12
    )
    for nodes, pod_counts in sizes.items():
        t0 = time.monotonic()
        cluster, names = fleet(nodes, env)
        print(f"{nodes} nodes x 8 A100 Ready in {time.monotonic() - t0:.0f} s", flush=True)
        try:
            for pods in pod_counts:
                for mode in modes:
                    cap = args.chart_cap if mode == "chart" else args.cap
                    run = one_mode(cluster, names, Run(nodes, pods, mode), cap, stack, path or "", args.profile)
                    if mode == "kube-scheduler":
                        baseline[(nodes, pods)] = run
                    runs.append(run)
                    print(report(run, baseline), flush=True)
        finally:
            cluster.stop()
    print("\n" + header)
    for run in runs:
        print(report(run, baseline))


if __name__ == "__main__":
    main()
