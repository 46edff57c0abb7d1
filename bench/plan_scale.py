"""The plan comparison at fleet size: one tenant of W workloads x R replicas (W * R pods) on the
plans a fleet team weighs, timed (compare only, no rendering), with the size of the longest table
cell (the Pending one).

- all Pending: pods of 30,000 MB on L4 cards (23,034 MB): no node takes any;
- half placed: the same pods on A100 nodes of 8 cards, the fleet holding half of them;
- all placed: on a fleet with room for every pod.

Usage: .venv/bin/python bench/plan_scale.py [workloads] [replicas] [nodes]   (default 50 100 10000)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.config.load import load_tenants  # noqa: E402
from components.reports.plan_comparison import compare, parse_plan, rows  # noqa: E402


def tenant(workloads: int, replicas: int) -> list:
    return load_tenants(
        "gpu-tenancy",
        [
            {
                "name": "team-a",
                "pools": [{"name": "worker", "mode": "docker", "nodes": 1}],
                "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
                "quota": {"gpus": 10**9, "gpumemMb": 10**9, "gpucoresPercent": 10**9},
                "workloads": [
                    {
                        "name": f"train-{i}",
                        "kind": "Deployment",
                        "image": "busybox",
                        "replicas": replicas,
                        "gpus": 1,
                        "gpumemMb": 30000 + i,  # each its own size: no two workloads alike
                        "gpucoresPercent": 30,
                        "failOnPending": False,  # the stack's own one node holds few of them
                    }
                    for i in range(workloads)
                ],
            }
        ],
    )


def main(workloads: int = 50, replicas: int = 100, nodes: int = 10_000) -> None:
    pods = workloads * replicas
    tenants = tenant(workloads, replicas)
    # An A100 holds two of these pods: pods / 16 nodes of 8 cards hold them all.
    cases = [
        ("all Pending", f"l4={nodes}xL4/8"),
        ("half placed", f"a100={max(1, pods // 32)}xA100-80GB/8"),
        ("all placed", f"a100={nodes // 2}xA100-80GB/8"),
    ]
    print(f"{workloads} workloads x {replicas} replicas = {pods:,} pods, one tenant:")
    for label, spec in cases:
        plan = parse_plan(spec)
        started = time.perf_counter()
        (result,) = compare(tenants, [plan])
        took = time.perf_counter() - started
        widest = max(len(cell) for row in rows([result]) for cell in row)
        print(
            f"  {label:12} {plan.describe():55} {took:8.2f} s  "
            f"{len(result.placement.placed):>6,} placed, {len(result.pending):>6,} Pending; "
            f"widest cell {widest:,} chars"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
