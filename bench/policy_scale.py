"""How the gpu-quotas pack's checks grow with the number of GPU workloads.

Runs the resource policy on every object and both stack policies on the whole set, for
N = 100, 1,000 and 10,000 pods spread over two tenants, and prints the time per N and the ratio
to the previous N (10x more objects; a ratio near 10 means linear growth).
Usage: .venv/bin/python bench/policy_scale.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "policy"))
sys.path.insert(0, str(ROOT))

import gpu_policies as gp  # noqa: E402
from pulumi_policy import PolicyResource, PolicyResourceOptions, ResourceValidationArgs, StackValidationArgs  # noqa: E402

OPTS = PolicyResourceOptions(False, [], False, [], None, [])


def config(n: int) -> dict:
    # quotas and fleets large enough that every pod fits: the work is the same as when it does not
    cards = max(1, n // 20)
    return {
        "tenants": {
            "team-a": {
                "model": "A100-80GB",
                "nodes": cards,
                "cardsPerNode": 1,
                "quota": {"gpus": 10 * n, "gpumemMb": 81920 * n, "gpucoresPercent": 100 * n},
            },
            "team-b": {
                "model": "L4",
                "nodes": cards,
                "cardsPerNode": 4,
                "quota": {"gpus": 10 * n, "gpumemMb": 23034 * n, "gpucoresPercent": 100 * n},
            },
        }
    }


def pods(n: int) -> list[tuple[str, dict]]:
    out = []
    for i in range(n):
        tenant = "team-a" if i % 2 else "team-b"
        limits = {"nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "5"}
        out.append(
            (
                "kubernetes:core/v1:Pod",
                {
                    "metadata": {"name": f"p{i}", "labels": {"gpu-tenancy/tenant": tenant}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
                },
            )
        )
    return out


def run(n: int) -> dict[str, float]:
    cfg, objs = config(n), pods(n)
    policies = {p.name: p for p in gp.POLICIES}
    found: list[str] = []

    def report(msg: str, urn: str | None = None) -> None:
        found.append(msg)

    t0 = time.perf_counter()
    for typ, props in objs:
        args = ResourceValidationArgs(typ, props, f"urn:pulumi:s::p::{typ}::x", "x", OPTS, None, cfg)
        policies["gpu-request-fits-one-card"].validate(args, report)
    t1 = time.perf_counter()
    resources = [
        PolicyResource(
            t, p, f"urn:pulumi:s::p::{t}::{p['metadata']['name']}", p["metadata"]["name"], OPTS, None, None, [], {}
        )
        for t, p in objs
    ]
    args = StackValidationArgs(resources, cfg)
    t2 = time.perf_counter()
    policies["gpu-quota-per-tenant"].validate(args, report)
    t3 = time.perf_counter()
    policies["gpu-fleet-fit"].validate(args, report)
    t4 = time.perf_counter()
    assert not found, found[:3]
    return {"resource policy (all objects)": t1 - t0, "quota stack policy": t3 - t2, "fit stack policy": t4 - t3}


def main() -> None:
    previous: dict[str, float] | None = None
    print(f"{'N':>7}  {'check':<30} {'seconds':>9}  {'x prev N':>8}")
    for n in (100, 1_000, 10_000):
        result = run(n)
        for name, secs in result.items():
            ratio = f"{secs / previous[name]:.1f}" if previous else "-"
            print(f"{n:>7}  {name:<30} {secs:>9.3f}  {ratio:>8}")
        previous = result


if __name__ == "__main__":
    main()
