"""Plan comparison: every pod of the stack's workloads placed on each fleet plan with the
rulebook's own packing, Pending pods named with HAMi's reason codes, and the command's output
and errors."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.domain.catalog import GPU_MODELS
from components.domain.requests import Demand, GpuRequest, PodRequest, Quota, RequestError, total_of
from components.domain.rules import (
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    HAMI_CODE_ORDER,
    NODE_INSUFFICIENT_DEVICE,
    Fleet,
    judge,
    pack,
    place_all,
)
from components.kube.hami_reasons import WORDS
from components.reports.plan_comparison import compare_tenant, main, parse_plan
from tests.support.tables import markdown_rows

A100, L4 = GPU_MODELS["A100-80GB"], GPU_MODELS["L4"]
SLICE = GpuRequest(1, 20000, 30)  # the reference lab's shared-a100 slice


def pod(*reqs: GpuRequest) -> PodRequest:
    return PodRequest(tuple((f"c{i}", r) for i, r in enumerate(reqs)))


def demand(name: str, *reqs: GpuRequest, replicas: int = 1, must_fit: bool = True) -> Demand:
    return Demand(name, pod(*reqs), replicas, must_fit)


# -- the full placement and HAMi's codes ---------------------------------------------------------
def test_every_code_the_rules_give_has_words_in_hami_reasons():
    assert set(HAMI_CODE_ORDER) <= set(WORDS)


def test_three_slices_share_one_a100_but_need_one_l4_each():
    slices = [demand("shared", SLICE, replicas=3)]
    a100 = place_all(slices, Fleet.of(A100, 1, 1))
    assert a100.pending == () and a100.placed == {"shared[0]": 0, "shared[1]": 0, "shared[2]": 0}
    assert (a100.cards_used, a100.cards) == (1, 1)
    assert a100.allocated == Quota(gpus=3, gpumem_mb=60000, gpucores=90)
    assert a100.capacity == Quota(gpus=10, gpumem_mb=81920, gpucores=100)

    one_l4 = place_all(slices, Fleet.of(L4, 1, 1))  # 23034 MB: one 20000 MB slice, 3034 MB left
    assert list(one_l4.placed) == ["shared[0]"]
    assert [(p.name, p.reasons) for p in one_l4.pending] == [
        ("shared[1]", ((CARD_INSUFFICIENT_MEMORY, 1),)),
        ("shared[2]", ((CARD_INSUFFICIENT_MEMORY, 1),)),
    ]
    assert one_l4.unplaceable == "shared[1]" and one_l4.allocated == Quota(1, 20000, 30)

    three_l4 = place_all(slices, Fleet.of(L4, 3, 1))
    assert three_l4.pending == () and sorted(three_l4.placed.values()) == [0, 1, 2]
    assert (three_l4.cards_used, three_l4.allocated.gpumem_mb) == (3, 60000)


def test_memory_left_but_not_cores_is_card_insufficient_core():
    # A fourth slice: 21920 MB are left on the A100, but only 10 % of its cores.
    result = place_all([demand("shared", SLICE, replicas=4)], Fleet.of(A100, 1, 1))
    (waiting,) = result.pending
    assert (waiting.name, waiting.reasons) == ("shared[3]", ((CARD_INSUFFICIENT_CORE, 1),))


def test_each_node_reports_its_own_code_and_the_counts_add_up():
    # Two L4 nodes: a 20000 MB slice on each; a third slice finds too little memory on both.
    result = place_all([demand("s", SLICE, replicas=3)], Fleet.of(L4, 2, 1))
    assert result.pending[0].reasons == ((CARD_INSUFFICIENT_MEMORY, 2),)
    # One node full of memory, the other of cores: both codes, one node each.
    mixed = place_all(
        [demand("mem", GpuRequest(1, 23034, 0)), demand("cores", GpuRequest(1, 1000, 100)), demand("x", SLICE)],
        Fleet.of(L4, 2, 1),
    )
    assert mixed.pending[0].reasons == ((CARD_INSUFFICIENT_MEMORY, 1), (CARD_INSUFFICIENT_CORE, 1))


@pytest.mark.parametrize(
    ("first", "then", "fleet", "codes"),
    [
        # More GPUs in one container than the node has cards: HAMi refuses before any card.
        ([], GpuRequest(2, 1000, 10), Fleet.of(A100, 1, 1), (NODE_INSUFFICIENT_DEVICE,)),
        # One card of two is free, the pod needs two: the taken card's code, and "too few".
        (
            [GpuRequest(1, 23034, 100)],
            GpuRequest(2, 1000, 10),
            Fleet.of(L4, 1, 2),
            (CARD_INSUFFICIENT_MEMORY, ALLOCATED_CARDS_INSUFFICIENT_REQUEST),
        ),
        # Ten vGPU slots per card (deviceSplitCount), all taken by 1000 MB slices.
        ([GpuRequest(1, 1000, 0)] * 10, GpuRequest(1, 1000, 0), Fleet.of(A100, 1, 1), (CARD_TIME_SLICING_EXHAUSTED,)),
        # A whole-card (100 %) request on a card already holding a 0 % slice.
        (
            [GpuRequest(1, 2000, 0)],
            GpuRequest(1, 1000, 100),
            Fleet.of(A100, 1, 1),
            (EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,),
        ),
        # A 0 % request on a card whose cores are all taken.
        ([GpuRequest(1, 1000, 100)], GpuRequest(1, 1000, 0), Fleet.of(A100, 1, 1), (CARD_COMPUTE_UNITS_EXHAUSTED,)),
    ],
)
def test_hami_codes_per_refusal(first, then, fleet, codes):
    # First-fit decreasing: each of `first` asks at least as much as `then`, so it goes first.
    ds = [demand(f"a{i}", r) for i, r in enumerate(first)] + [demand("z", then)]
    result = place_all(ds, fleet)
    assert set(result.placed) == {f"a{i}[0]" for i in range(len(first))}
    assert [p.name for p in result.pending] == ["z[0]"]
    assert result.pending[0].codes == codes


def test_pods_allowed_to_stay_pending_go_after_those_that_must_fit():
    # The 60000 MB pod may stay Pending; placing it first would leave the slice no memory.
    ds = [demand("big", GpuRequest(1, 70000, 0), must_fit=False), demand("must", SLICE)]
    result = place_all(ds, Fleet.of(A100, 1, 1))
    assert result.placed == {"must[0]": 0}
    (waiting,) = result.pending
    assert waiting.allowed and waiting.codes == (CARD_INSUFFICIENT_MEMORY,)
    assert result.unplaceable is None and pack(ds, Fleet.of(A100, 1, 1)).unplaceable is None
    # Room left over: the optional pod is placed too.
    assert place_all(ds, Fleet.of(A100, 2, 1)).placed == {"must[0]": 0, "big[0]": 1}


def test_a_node_pack_stops_scanning_leaves_a_zero_mb_pod_without_a_code():
    # The first pod takes all 81920 MB (0 % cores); HAMi would still take a 0 MB / 10 % slice
    # there, but pack drops a node with no memory left: the pod stays Pending, as in pack.
    ds = [demand("all-mem", GpuRequest(1, 81920, 0)), demand("zero", GpuRequest(1, 0, 10))]
    result = place_all(ds, Fleet.of(A100, 1, 1))
    assert result.unplaceable == pack(ds, Fleet.of(A100, 1, 1)).unplaceable == "zero[0]"
    assert result.pending[0].reasons == ()


# -- property: one rulebook -------------------------------------------------------------------
requests = st.builds(GpuRequest, gpus=st.integers(1, 3), mem_mb=st.integers(0, 90000), cores=st.integers(0, 100))
demands = st.lists(
    st.tuples(st.lists(requests, min_size=1, max_size=3), st.integers(1, 4), st.booleans()), max_size=8
).map(lambda ds: [Demand(f"w{i}", pod(*reqs), n, must) for i, (reqs, n, must) in enumerate(ds)])
fleets = st.builds(
    Fleet.of, model=st.sampled_from([A100, L4]), nodes=st.integers(1, 4), cards_per_node=st.integers(1, 4)
)


@settings(max_examples=300, deadline=None)
@given(demands, fleets)
def test_full_placement_agrees_with_judge_and_pack(ds, fleet):
    result = place_all(ds, fleet)
    packing = pack(ds, fleet)
    verdict = judge(ds, Quota(10**9, 10**9, 10**9), fleet)
    # Whether everything that must be scheduled fits, and which pod does not first.
    assert result.unplaceable == packing.unplaceable == verdict.unplaceable
    assert (verdict.unplaceable is None) == all(p.allowed for p in result.pending)
    # Every pod pack placed sits on the same node.
    assert {k: result.placed[k] for k in packing.placed} == packing.placed
    # Every pod is either placed or Pending, once.
    names = list(result.placed) + [p.name for p in result.pending]
    assert sorted(names) == sorted(f"{d.name}[{k}]" for d in ds for k in range(d.replicas))
    by_name = {f"{d.name}[{k}]": d for d in ds for k in range(d.replicas)}
    # Usage is what the placed pods ask for, within the fleet; cards used are no more than slices.
    assert result.allocated == total_of(by_name[n].pod.total for n in result.placed)
    cap = result.capacity
    assert result.allocated.gpumem_mb <= cap.gpumem_mb and result.allocated.gpucores <= cap.gpucores
    assert result.cards_used <= min(result.cards, result.allocated.gpus)
    for p in result.pending:
        assert p.allowed == (not by_name[p.name].must_fit)
        assert all(0 < n <= fleet.nodes for _, n in p.reasons)
        # A code for every refusal, except the 0 MB case of a node pack stopped scanning.
        assert p.reasons or any(r.mem_mb == 0 for _, r in by_name[p.name].pod.containers)


# -- the command ----------------------------------------------------------------------------
STACK = {
    "config": {
        "gpu-tenancy:cluster": {"name": "gpu-lab"},
        "gpu-tenancy:tenants": [
            {
                "name": "team-a",
                "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
                "quota": {"gpus": 10, "gpumemMb": 81920, "gpucoresPercent": 100},
                "workloads": [
                    {
                        "name": "shared-a100",
                        "kind": "Deployment",
                        "replicas": 3,
                        "image": "busybox",
                        "gpumemMb": 20000,
                        "gpucoresPercent": 30,
                    }
                ],
            },
            {
                "name": "team-b",
                "gpu": {"model": "L4", "cardsPerNode": 4},
                "quota": {"gpus": 40, "gpumemMb": 40000, "gpucoresPercent": 400},
                "apiPort": 31444,
                "konnectivityPort": 31133,
                "podCidr": "10.245.0.0/16",
                "serviceCidr": "10.97.0.0/16",
                "workloads": [
                    {"name": "whole", "image": "busybox", "gpus": 1},
                    {"name": "pinned", "image": "busybox", "gpumemMb": 8000, "gpucoresPercent": 25, "cardType": "L4"},
                ],
            },
        ],
    }
}


@pytest.fixture
def stack(tmp_path):
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump(STACK))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_syntax():
    p = parse_plan("l4=24xL4/4")
    assert (p.name, p.fleet) == ("l4", Fleet.of(L4, 24, 4))
    assert parse_plan("8xa100-80gb") == parse_plan("8xA100-80GB")  # model key in any case
    assert (
        parse_plan("8xA100-80GB").name == "8xA100-80GB"
        and parse_plan("8xA100-80GB").fleet.groups[0].cards_per_node == 1
    )


def test_text_table(capsys, stack):
    code, out, err = run(capsys, "--stack", str(stack), "--plan", "a100=1xA100-80GB", "--plan", "l4=1xL4")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "  a100 = 1 node(s) x 1 A100-80GB, 81920 MB / 100 % each" in lines
    row = {tuple(line.split()[:2]): line for line in lines if line.startswith("team-")}
    # Three slices share the A100; on one L4 only one fits, the others lack memory.
    assert row["team-a", "a100"].split()[2:12] == ["3", "/", "3", "1", "/", "1", "60,000", "/", "81,920", "90"]
    assert "2 pods: CardInsufficientMemory (1/1 nodes)" in row["team-a", "l4"]
    assert row["team-a", "l4"].split()[2:5] == ["1", "/", "3"]
    # team-b: a whole card is 81920 MB on an A100, over its 40000 MB quota; cardType L4 fits no A100.
    assert "over: gpumem MB 89920 > quota 40000" in row["team-b", "a100"]
    assert "Pod pinned: 1 pod: CardTypeMismatch (1/1 nodes)" in row["team-b", "a100"]
    # On one L4 the whole card leaves the pinned slice no memory; the quota holds.
    assert row["team-b", "l4"].split()[2:5] == ["1", "/", "2"] and " ok " in row["team-b", "l4"]
    assert row["team-b", "l4"].rstrip().endswith("Pod pinned: 1 pod: CardInsufficientMemory (1/1 nodes)")
    assert f"  {CARD_TYPE_MISMATCH}: {WORDS[CARD_TYPE_MISMATCH]}" in lines


def test_markdown_is_one_valid_table(capsys, stack):
    code, out, _ = run(capsys, "--stack", str(stack), "--plan", "1xA100-80GB", "--plan", "l4=2xL4/2", "--markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"### GPU plan comparison: `{stack}`"
    table = [line for line in lines if line.startswith("|")]
    start = lines.index(table[0])
    assert lines[start : start + len(table)] == table  # one contiguous block
    header, *cells = markdown_rows(out)
    width = len(header)
    assert header[:3] == ["tenant", "plan", "pods placed"]
    assert len(cells) == 4 and all(len(c) == width for c in cells)
    assert [c[:3] for c in cells] == [
        ["team-a", "1xA100-80GB", "3 / 3"],
        ["team-a", "l4", "3 / 3"],
        ["team-b", "1xA100-80GB", "1 / 2"],
        ["team-b", "l4", "2 / 2"],
    ]


def test_a_workload_the_plan_cannot_express_is_a_row_not_a_traceback():
    class Broken:
        name, kind, card_type = "odd", "Pod", None

        def demand(self, cards):
            raise RequestError("nvidia.com/gpumem", f"gpumem does not fit {cards[0].key}")

    tenant = SimpleNamespace(name="team-x", workloads=(Broken(),), quota=SimpleNamespace(quota=Quota(1, 1, 1)))
    result = compare_tenant(tenant, parse_plan("1xL4"))
    assert result.unexpressible == ("Pod odd: cannot be expressed on L4: gpumem does not fit L4",)
    assert result.pods == 0 and result.over_quota == ()


@pytest.mark.parametrize(
    ("plans", "message"),
    [
        (["8xA100-80GB"], "give at least two --plan"),
        (["8xA100-80GB", "8A100"], "plan '8A100' is not [name=]<nodes>x<model>"),
        (["8xA100-80GB", "4xH100"], "plan '4xH100': unknown card model 'H100'; known: A100-80GB, L4"),
        (["8xA100-80GB", "0xL4"], "plan '0xL4': 0 nodes"),
        (["8xA100-80GB", "2xL4/0"], "plan '2xL4/0': 0 cards per node"),
        (["p=8xA100-80GB", "p=2xL4"], "plan name 'p' is given twice"),
    ],
)
def test_bad_plans(capsys, stack, plans, message):
    argv = ["--stack", str(stack)] + [a for p in plans for a in ("--plan", p)]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def bad_config(path):
    doc = yaml.safe_load(path.read_text())
    doc["config"]["gpu-tenancy:tenants"][1]["quota"]["gpumemMb"] = "lots"
    path.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda p: p.unlink(), "no stack file"),
        (lambda p: p.write_text("config: [unclosed\n"), "is not valid YAML"),
        (lambda p: p.write_text("encryptionsalt: x\n"), "has no `config:` mapping"),
        (lambda p: p.write_text("config:\n  gpu-tenancy:cluster: {}\n"), "gpu-tenancy:tenants: is required"),
        (bad_config, "gpu-tenancy:tenants[1].quota.gpumemMb: must be a plain integer in MB"),
    ],
)
def test_bad_stack_files(capsys, stack, prepare, message):
    prepare(stack)
    code, out, err = run(capsys, "--stack", str(stack), "--plan", "1xA100-80GB", "--plan", "1xL4")
    assert (code, out) == (2, "")
    assert message in err and "Traceback" not in err


def test_project_is_the_key_prefix(capsys, tmp_path):
    other = {"config": {k.replace("gpu-tenancy:", "my-lab:"): v for k, v in STACK["config"].items()}}
    other["config"]["my-lab:tenants"][0]["quota"]["gpus"] = 0
    path = tmp_path / "Pulumi.other.yaml"
    path.write_text(textwrap.dedent(yaml.safe_dump(other)))
    code, _, err = run(capsys, "--stack", str(path), "--plan", "1xA100-80GB", "--plan", "1xL4")
    assert code == 2 and "my-lab:tenants[0].quota.gpus" in err


def test_a_fleet_size_pending_cell_names_three_workloads_and_counts_the_rest():
    from components.domain.rules import Fleet
    from components.reports.plan_comparison import PENDING_GROUPS_SHOWN, Plan, compare_tenant, pending_cell

    a100 = GPU_MODELS["A100-80GB"]
    workloads = [
        SimpleNamespace(
            kind="Deployment",
            name=f"w{i}",
            demand=lambda models, i=i: Demand(
                f"Deployment w{i}", PodRequest((("c", GpuRequest(1, 90000 + i, 10)),)), replicas=100
            ),
        )
        for i in range(5)
    ]
    tenant = SimpleNamespace(name="t", workloads=workloads, quota=SimpleNamespace(quota=Quota(10**9, 10**9, 10**9)))
    result = compare_tenant(tenant, Plan("p", Fleet.of(a100, 1000, 8)))
    cell = pending_cell(result)
    assert cell.count("pods: CardInsufficientMemory") == PENDING_GROUPS_SHOWN
    assert cell.endswith("and 2 more workload(s), 200 pods") and len(cell) < 400, cell
