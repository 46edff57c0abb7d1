"""How the gpu-quotas pack's checks grow with the number of GPU workloads.

Runs the resource policies on every object and the stack policies on the whole set, for N = 50,
500, 5,000 and 50,000 one-slice pods over two tenants, and prints the time per N and the ratio to
the previous N (10x more objects; a ratio near 10 means linear growth). The fit is measured up to
the 500 pods the largest docker fleets hold (beyond, it stops at the first pod that does not fit).
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

from tests.support.policy_pack import via_label  # noqa: E402

OPTS = PolicyResourceOptions(False, [], False, [], None, [])


# The largest fleets the stack config allows for docker workers: 10 nodes of 1 A100 (the mock
# plugin's limit) and 10 nodes of 4 L4, 10 vGPU slots per card: 100 + 400 pods of one slice.
CONFIG = {
    "tenants": [
        {
            "name": "team-a",
            "pools": [{"name": "worker", "nodes": 10}],
            "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
            "quota": {"gpus": 10**9, "gpumemMb": 10**9, "gpucoresPercent": 10**9},
        },
        {
            "name": "team-b",
            "pools": [{"name": "worker", "nodes": 10}],
            "gpu": {"model": "L4", "cardsPerNode": 4},
            "quota": {"gpus": 10**9, "gpumemMb": 10**9, "gpucoresPercent": 10**9},
        },
    ]
}
FLEET_PODS = 500


def pods(n: int) -> list[tuple[str, dict]]:
    """n one-slice pods, a fifth for team-a, so that 500 exactly fill both fleets."""
    out = []
    for i in range(n):
        tenant = "team-a" if i % 5 == 0 else "team-b"
        limits = {"nvidia.com/gpumem": "2000", "nvidia.com/gpucores": "5"}
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


def run(n: int, with_fit: bool) -> dict[str, float]:
    objs = pods(n)
    policies = {p.name: p for p in gp.POLICIES}
    found: list[str] = []

    def report(msg: str, urn: str | None = None) -> None:
        found.append(msg)

    t0 = time.perf_counter()
    for typ, props in objs:
        via = via_label(props)  # the tenant's own provider, as the program's objects come through theirs
        args = ResourceValidationArgs(typ, props, f"urn:pulumi:s::p::{typ}::x", "x", OPTS, via, CONFIG)
        policies["gpu-tenant-known"].validate(args, report)
        policies["gpu-request-fits-one-card"].validate(args, report)
    t1 = time.perf_counter()
    resources = [
        PolicyResource(
            t,
            p,
            f"urn:pulumi:s::p::{t}::{p['metadata']['name']}",
            p["metadata"]["name"],
            OPTS,
            via_label(p),
            None,
            [],
            {},
        )
        for t, p in objs
    ]
    args = StackValidationArgs(resources, CONFIG)
    t2 = time.perf_counter()
    policies["gpu-quota-per-tenant"].validate(args, report)
    t3 = time.perf_counter()
    out = {"resource policies (all objects)": t1 - t0, "quota stack policy": t3 - t2}
    if with_fit:
        policies["gpu-fleet-fit"].validate(args, report)
        out["fit stack policy"] = time.perf_counter() - t3
    assert not found, found[:3]
    return out


def main() -> None:
    print(f"fleets: {FLEET_PODS} one-slice pods fill the largest docker fleets the config allows")
    print(f"{'N':>7}  {'check':<32} {'seconds':>9}  {'x prev N':>8}")
    previous: dict[str, float] = {}
    for n in (50, 500, 5_000, 50_000):
        result = run(n, with_fit=n <= FLEET_PODS)
        for name, secs in result.items():
            ratio = f"{secs / previous[name]:.1f}" if name in previous else "-"
            print(f"{n:>7}  {name:<32} {secs:>9.3f}  {ratio:>8}")
        previous = result


if __name__ == "__main__":
    main()
