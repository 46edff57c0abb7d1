"""Mixed fleets: several card models in one tenant, chosen per pool. The rulebook reads a request
per card model with HAMi's own rules (`use-gputype`/`nouse-gputype` matching, memory and
percentage defaults from the card a pod lands on, CardTypeMismatch when no allowed card
exists), the config validates per pool, and the program writes each pool's own cards."""

from __future__ import annotations

import copy

import pytest

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.domain.catalog import GPU_MODELS, GpuModel
from components.domain.hami_annotations import (
    NOUSE_GPU_TYPE,
    RES_GPUCORES,
    RES_GPUMEM,
    RES_GPUMEM_PERCENTAGE,
    USE_GPU_TYPE,
)
from components.domain.requests import CardTypes, demand
from components.domain.rules import CARD_TYPE_MISMATCH, Fleet, NodeGroup, pack, place_all, pod_violations
from components.reports.plan_comparison import compare_tenant, parse_plan, render_table
from tests.support.harness import ROOT, load_config_file, run_program

A100, L4 = GPU_MODELS["A100-80GB"], GPU_MODELS["L4"]
L40S = GpuModel("L40S", "NVIDIA L40S", "NVIDIA L40S", 46068)  # not in the catalogue: matching only
MIXED = Fleet((NodeGroup(A100, 1, 1, "a100"), NodeGroup(L4, 1, 2, "l4")))
MIXED_STACK = load_config_file(ROOT / "examples" / "Pulumi.mixed.yaml")


@pytest.mark.parametrize(
    ("use", "nouse", "allowed"),
    [
        (None, None, {"A100-80GB", "L4", "L40S"}),
        ("L4", None, {"L4", "L40S"}),  # a substring: "L4" matches the L40S too, as in HAMi
        ("l4", None, {"L4", "L40S"}),  # case-insensitive
        ("A100,L40S", None, {"A100-80GB", "L40S"}),  # a comma list: any entry
        (None, "L4", {"A100-80GB"}),
        (None, "L40", {"A100-80GB", "L4"}),
        ("NVIDIA", "A100", {"L4", "L40S"}),  # both: allowed by use, then not excluded by nouse
        ("H100", None, set()),
        (" A100 , L40S ", None, {"A100-80GB", "L40S"}),  # entries trimmed (HAMi 2.10.0)
        ("L4,", None, {"L4", "L40S"}),  # an empty entry is dropped
        (None, " ", {"A100-80GB", "L4", "L40S"}),  # a list with no entry: no constraint
    ],
)
def test_card_types_match_as_hami_matches_them(use, nouse, allowed):
    types = CardTypes.of(use, nouse)
    assert {m.key for m in (A100, L4, L40S) if types.allows(m)} == allowed
    annotations = {k: v for k, v in ((USE_GPU_TYPE, use), (NOUSE_GPU_TYPE, nouse)) if v is not None}
    assert CardTypes.from_annotations(annotations) == types


def test_a_request_is_read_on_the_card_it_lands_on():
    whole = demand("w", [("c", {RES_GPUCORES: 20})], (A100, L4))  # memory: the whole card
    assert whole.pod_on(A100).total.gpumem_mb == 81920 and whole.pod_on(L4).total.gpumem_mb == 23034
    half = demand("h", [("c", {RES_GPUMEM_PERCENTAGE: 50})], (A100, L4))
    assert half.pod_on(A100).total.gpumem_mb == 40960 and half.pod_on(L4).total.gpumem_mb == 11517
    # the quota counts it on the largest card it may land on (HAMi charges what that card gives)
    assert whole.usage.gpumem_mb == 81920
    on_l4 = demand("l", [("c", {RES_GPUCORES: 20})], (A100, L4), CardTypes.of("L4"))
    assert on_l4.usage.gpumem_mb == 23034 and on_l4.pod_on(A100) is None


def _placed_on(d, fleet: Fleet) -> str | None:
    """The group of the node one pod of `d` went to, or None."""
    result = pack([d], fleet)
    index = result.placed.get(f"{d.name}[0]")
    if index is None:
        return None
    nodes = [g.name for g in fleet.groups for _ in range(g.nodes)]
    return nodes[index]


def test_each_pod_lands_on_a_card_its_types_allow():
    """The four pods of the issue on an A100 pool and an L4 pool."""
    slice_ = [("c", {RES_GPUMEM: 8000, RES_GPUCORES: 10})]
    assert _placed_on(demand("use-l4", slice_, MIXED.models, CardTypes.of("L4")), MIXED) == "l4"
    assert _placed_on(demand("nouse-l4", slice_, MIXED.models, CardTypes.of(None, "L4")), MIXED) == "a100"
    big = demand("big", [("c", {RES_GPUMEM: 30000, RES_GPUCORES: 10})], MIXED.models)
    flipped = Fleet(tuple(reversed(MIXED.groups)))
    assert _placed_on(big, MIXED) == "a100" and _placed_on(big, flipped) == "a100"  # an L4 has 23034 MB
    nowhere = demand("h100", slice_, MIXED.models, CardTypes.of("H100"))
    placement = place_all([nowhere], MIXED)
    (pending,) = placement.pending
    assert pending.reasons == ((CARD_TYPE_MISMATCH, MIXED.nodes),)  # every node says so, as HAMi's events do
    (problem,) = pod_violations(nowhere, MIXED)
    assert "nvidia.com/use-gputype 'H100'" in problem and CARD_TYPE_MISMATCH in problem
    assert "NVIDIA A100-SXM4-80GB" in problem and "NVIDIA L4" in problem


def test_a_pod_too_big_for_every_allowed_card_says_why_per_pool():
    huge = demand("huge", [("c", {RES_GPUMEM: 90000})], MIXED.models)
    problems = pod_violations(huge, MIXED)
    assert problems == [
        "on A100-80GB nodes (a100): container c: gpumem 90000 MB exceeds one NVIDIA A100 80GB card (81920 MB)",
        "on L4 nodes (l4): container c: gpumem 90000 MB exceeds one NVIDIA L4 24GB card (23034 MB)",
    ]
    assert pod_violations(demand("fits-a100", [("c", {RES_GPUMEM: 30000})], MIXED.models), MIXED) == []


def test_the_placement_counts_what_each_card_gives():
    """Allocated memory is per card model: a whole-card request takes 81920 MB on an A100, 23034 on an L4."""
    whole = demand("w", [("c", {RES_GPUCORES: 10})], MIXED.models, replicas=3)
    placement = place_all([whole], MIXED)
    assert not placement.pending and placement.cards_used == 3
    assert placement.allocated.gpumem_mb == 81920 + 2 * 23034


def test_the_mixed_example_is_valid_and_its_fleet_is_per_pool():
    cfg = load_stack_config("gpu-tenancy", {k.split(":", 1)[1]: v for k, v in MIXED_STACK.items()})
    (t,) = cfg.tenants
    assert [(g.name, g.model.key, g.nodes, g.cards_per_node) for g in t.fleet.groups] == [
        ("a100", "A100-80GB", 20, 8),
        ("l4", "L4", 60, 8),
    ]
    usage = {d.name: d.usage for d in t.demands()}
    assert usage["Deployment batch"].gpumem_mb == 20 * 81920  # avoids L4: whole A100 cards
    assert usage["Deployment inference"].gpumem_mb == 100 * 8000


def _mixed(**team_a_changes) -> dict:
    config = {k.split(":", 1)[1]: v for k, v in copy.deepcopy(MIXED_STACK).items()}
    config["tenants"][0].update(team_a_changes)
    return config


def _problems(config: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", config)
    return [(k.removeprefix("gpu-tenancy:"), m) for k, m in err.value.problems]


def test_bad_mixed_configs_give_one_error_naming_the_key():
    pools = copy.deepcopy(MIXED_STACK["gpu-tenancy:tenants"][0]["pools"])
    pools[0]["gpu"] = {"model": "L4", "cardsPerNode": 2}  # the docker worker beside kwok pools
    ((key, msg),) = _problems(_mixed(pools=pools))
    assert key == "tenants[0].pools[0].gpu" and "carry no cards" in msg
    workloads = [{"name": "x", "image": "busybox", "gpucoresPercent": 10, "cardType": "H100"}]
    ((key, msg),) = _problems(_mixed(workloads=workloads))
    assert key == "tenants[0].workloads[0].cardType" and "'NVIDIA L4'" in msg
    workloads = [{"name": "x", "image": "busybox", "gpucoresPercent": 10, "avoidCardType": "NVIDIA"}]
    ((key, _),) = _problems(_mixed(workloads=workloads))
    assert key == "tenants[0].workloads[0].avoidCardType"
    # a docker pool's own cards over the mock plugin's per-node limit: named at that pool's gpu
    docker_only = [{"name": "worker", "mode": "docker", "nodes": 1, "gpu": {"model": "A100-80GB", "cardsPerNode": 2}}]
    problems = _problems(_mixed(pools=docker_only, workloads=[]))
    assert [k for k, _ in problems] == ["tenants[0].pools[0].gpu.cardsPerNode"]
    # a workload that fits no allowed card of the mixed fleet
    workloads = [{"name": "x", "image": "busybox", "gpumemMb": 30000, "cardType": "L4"}]
    ((key, msg),) = _problems(_mixed(workloads=workloads))
    assert key == "tenants[0].workloads[0]" and "exceeds one NVIDIA L4 24GB card" in msg


def test_the_program_writes_each_pools_own_cards():
    rec = run_program({**load_config_file(ROOT / "Pulumi.dev.yaml"), **MIXED_STACK})
    a100, l4 = rec.named("team-a-a100"), rec.named("team-a-l4")
    assert (a100.inputs["model"], a100.inputs["cards_per_node"]) == ("A100-80GB", 8)
    assert (l4.inputs["model"], l4.inputs["cards_per_node"]) == ("L4", 8)
    expected = rec.named("team-a-hami-registration").inputs["expected"]
    assert len(expected) == 80 and all(len(ids) == 8 for ids in expected.values())
    inventory = rec.stack_outputs["team-a"]["gpuInventory"]
    assert inventory["model"] == "NVIDIA A100 80GB + NVIDIA L4 24GB"
    assert inventory["cards"] == 640 and inventory["memoryMb"] == 160 * 81920 + 480 * 23034
    assert inventory["pools"]["l4"] == {"model": "NVIDIA L4 24GB", "nodes": 60, "cardsPerNode": 8}


def test_a_mixed_plan_is_compared_pod_by_pod():
    plan = parse_plan("mix=2xA100-80GB/8+6xL4/8")
    assert plan.name == "mix" and [(g.model.key, g.nodes, g.cards_per_node) for g in plan.fleet.groups] == [
        ("A100-80GB", 2, 8),
        ("L4", 6, 8),
    ]
    assert parse_plan("2xA100-80GB/8+6xL4").name == "2xA100-80GB/8+6xL4"
    cfg = load_stack_config("gpu-tenancy", {k.split(":", 1)[1]: v for k, v in MIXED_STACK.items()})
    (t,) = cfg.tenants
    result = compare_tenant(t, plan)
    pending = {p.demand for p in result.pending}
    # 2 A100 nodes hold 8 of the 40 training pods; the L4 nodes never take them (cardType A100)
    assert "Deployment training" in pending
    training = [p for p in result.pending if p.demand == "Deployment training"]
    assert len(training) == 32
    table = render_table([result], [plan])
    assert "mix = 2 node(s) x 8 A100-80GB" in table and "6 node(s) x 8 L4" in table
