"""Config validation and the pack cannot disagree: generated tenants and workloads get the same
quota and fit verdicts from both, and no pod's containers are ever split across nodes."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulumi_policy import PolicyResource, PolicyResourceOptions, StackValidationArgs

from components.config.load import load_stack_config
from components.config.model import WorkloadConfig
from components.config.problems import ConfigError
from components.domain.catalog import GPU_MODELS
from components.domain.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM, RES_GPUMEM_PERCENTAGE
from components.domain.requests import Demand, GpuRequest, PodRequest, parse_request
from components.domain.rules import Fleet, pack
from components.tenant.gpu_workload import deployment_spec, pod_annotations, pod_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "policy"))
import gpu_policies as gp  # noqa: E402
import gpu_tenants as gt  # noqa: E402

OPTS = PolicyResourceOptions(False, [], False, [], None, [])
POLICY = {p.name: p for p in gp.POLICIES}


@st.composite
def tenants(draw):
    model = draw(st.sampled_from(sorted(GPU_MODELS)))
    card = GPU_MODELS[model]
    cards = draw(st.integers(1, 1 if model == "A100-80GB" else 4))  # what the mock plugin can advertise
    workers = draw(st.integers(1, 3))
    quota = {
        "gpus": draw(st.integers(1, 30)),
        "gpumemMb": draw(st.integers(card.memory_mb, card.memory_mb * 6)),
        "gpucoresPercent": draw(st.integers(100, 600)),
    }
    workloads = []
    for j in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["Pod", "Deployment"]))
        w = {"name": f"w{j}", "kind": kind, "image": "busybox"}
        if kind == "Deployment":
            w["replicas"] = draw(st.integers(1, 4))
            rollout = draw(st.sampled_from(["default", "recreate", "surge"]))
            if rollout == "recreate":
                w["rollout"] = {"strategy": "Recreate"}
            elif rollout == "surge":
                w["rollout"] = {"maxSurge": draw(st.integers(1, 2)), "maxUnavailable": draw(st.integers(0, 1))}
        shape = draw(st.sampled_from(["slice", "bare", "cores-only"]))
        if shape == "slice":
            w["gpumemMb"] = draw(st.integers(1000, card.memory_mb))
            w["gpucoresPercent"] = draw(st.integers(0, 100))
        elif shape == "bare":
            w["gpus"] = draw(st.integers(1, cards))
        else:
            w["gpucoresPercent"] = draw(st.integers(1, 100))
        if draw(st.booleans()):
            w["failOnPending"] = False
        workloads.append(w)
    return {
        "name": "team-a",
        "pools": [{"name": "worker", "nodes": workers}],
        "gpu": {"model": model, "cardsPerNode": cards},
        "quota": quota,
        "workloads": workloads,
    }


@st.composite
def mixed_tenants(draw):
    """A tenant whose cards sit on an A100 pool and an L4 pool (simulated nodes), its workloads
    picking card types. Each pod fits some card it may use (a pod that fits none is a per-object
    refusal, the same in both: tests/unit/test_mixed_fleets.py); whether they all fit together
    is what is compared."""
    pools = [{"name": "worker", "mode": "docker", "nodes": 1}]
    least = 4
    for name, model in (("a100", "A100-80GB"), ("l4", "L4")):
        gpu = {"model": model, "cardsPerNode": draw(st.integers(1, 4))}
        least = min(least, gpu["cardsPerNode"])
        pools.append({"name": name, "mode": "kwok", "nodes": draw(st.integers(1, 2)), "gpu": gpu})
    tenant = draw(tenants())
    types = st.sampled_from(
        [{}, {"cardType": "A100"}, {"cardType": "L4"}, {"cardType": "a100,l4"}, {"avoidCardType": "L4"}]
    )
    workloads = []
    for w in tenant["workloads"]:
        w = {**w, **draw(types)}
        if "gpumemMb" in w:
            w["gpumemMb"] = draw(st.integers(1000, 23034))
        if "gpus" in w:
            w["gpus"] = draw(st.integers(1, least))
        workloads.append(w)
    return {**tenant, "pools": pools, "workloads": workloads, "gpu": {"model": "A100-80GB", "cardsPerNode": 1}}


def config_verdict(tenant: dict) -> tuple[bool, bool]:
    """(over quota, something that must be scheduled does not fit) per load_stack_config."""
    try:
        load_stack_config("gpu-tenancy", {"tenants": [tenant]})
    except ConfigError as err:
        messages = [m for _, m in err.problems]
        over = any("more than the tenant's quota" in m for m in messages)
        unfit = any("cannot be placed on the fleet" in m for m in messages)
        assert over or unfit, messages  # nothing else can be wrong with a generated tenant
        return over, unfit
    return False, False


def pack_verdict(tenant: dict) -> tuple[bool, bool]:
    """The same workloads as the program creates them (GpuWorkload's pod spec), through the pack."""
    bare = {**tenant, "workloads": []}
    cfg = load_stack_config("gpu-tenancy", {"tenants": [bare]})
    (t,) = cfg.tenants
    resources = []
    for w in tenant["workloads"]:
        wl = WorkloadConfig.model_validate(w, by_alias=True, by_name=False)
        meta = {"name": wl.name, "labels": {gt.TENANT_LABEL: t.name}, "annotations": pod_annotations(wl)}
        if wl.kind == "Pod":
            typ, props = "kubernetes:core/v1:Pod", {"metadata": meta, "spec": pod_spec(wl)}
        else:
            typ = "kubernetes:apps/v1:Deployment"
            props = {"metadata": meta, "spec": deployment_spec(wl, meta["labels"])}
        resources.append(PolicyResource(typ, props, f"urn:x::{wl.name}", wl.name, OPTS, None, None, [], {}))
    config = {"tenants": [bare]}
    out: dict[str, list[str]] = {}
    for name in ("gpu-quota-per-tenant", "gpu-fleet-fit"):
        out[name] = []
        POLICY[name].validate(StackValidationArgs(resources, config), lambda m, urn=None, n=name: out[n].append(m))
    return bool(out["gpu-quota-per-tenant"]), bool(out["gpu-fleet-fit"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tenants())
def test_config_and_pack_give_the_same_verdicts(tenant):
    over, unfit = config_verdict(tenant)
    pack_over, pack_unfit = pack_verdict(tenant)
    assert pack_over == over
    # The config reports the fit only once the quota holds (one problem at a time per tenant).
    if not over:
        assert pack_unfit == unfit


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_tenants())
def test_config_and_pack_agree_on_mixed_fleets(tenant):
    over, unfit = config_verdict(tenant)
    pack_over, pack_unfit = pack_verdict(tenant)
    assert pack_over == over
    if not over:
        assert pack_unfit == unfit


resources = st.fixed_dictionaries(
    {},
    optional={
        RES_GPU: st.integers(1, 3),
        RES_GPUMEM: st.integers(0, 30000),
        RES_GPUMEM_PERCENTAGE: st.integers(0, 100),
        RES_GPUCORES: st.integers(0, 100),
    },
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(resources, min_size=1, max_size=3), min_size=1, max_size=12),
    st.integers(1, 3),
    st.integers(1, 4),
)
def test_a_pods_containers_are_never_split_and_nodes_never_overfilled(pods, nodes, cards):
    card = GPU_MODELS["L4"]
    fleet = Fleet.of(card, nodes, cards)
    demands = []
    for i, containers in enumerate(pods):
        reqs = [parse_request(r, card) for r in containers]
        pod = PodRequest(tuple((f"c{j}", r) for j, r in enumerate(reqs) if r is not None))
        demands.append(Demand(f"p{i}", pod))
    result = pack(demands, fleet)
    # each placed pod sits on exactly one node, and no node holds more than its cards allow
    per_node: dict[int, list[GpuRequest]] = {}
    for d in demands:
        name = f"{d.name}[0]"
        if name in result.placed:
            per_node.setdefault(result.placed[name], []).extend(r for _, r in d.pod.containers)
    for reqs in per_node.values():
        assert sum(r.total_mem_mb for r in reqs) <= cards * card.memory_mb
        assert sum(r.total_cores for r in reqs) <= cards * card.cores
        assert all(r.gpus <= cards for r in reqs)
    # a pod whose whole-card containers need more cards than one node has never fits,
    # however many nodes the fleet has
    for d in demands:
        exclusive = sum(r.gpus for _, r in d.pod.containers if r.cores >= card.cores)
        if exclusive > cards:
            assert f"{d.name}[0]" not in result.placed
