"""The rulebook's placement keeps its answers when it skips work at fleet size: a demand's next pod
starting where its last went, a demand no node took judged once, untouched nodes answering as
one. Checked against the plain routine it replaces (every pod scans every open node from the
first, every Pending pod asks every node) on random fleets and workloads, pods of one and of
several containers, whole and partial cards, card types, and pods allowed to stay Pending."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.domain import rules
from components.domain.catalog import GPU_MODELS
from components.domain.requests import CardTypes, Demand, demand
from components.domain.rules import Fleet, NodeGroup, Placement, place_all

MODELS = list(GPU_MODELS.values())


def plain_fit(d: Demand, cards: list, pod_name: str = "") -> tuple[list | None, tuple[str, ...]]:
    """rules._fit as it was written first: the node's cards copied, then each container placed."""
    pod = d.pod_on(cards[0].model)
    if any(req.gpus > len(cards) for _, req in (pod or d.pod).containers):
        return None, (rules.NODE_INSUFFICIENT_DEVICE,)
    if pod is None:
        return None, (rules.CARD_TYPE_MISMATCH,)
    trial = [c.copy() for c in cards]
    for _, req in pod.containers:
        refusals = [c.refusal(req) for c in trial]
        fits = [c for c, r in zip(trial, refusals, strict=True) if r is None]
        if len(fits) < req.gpus:
            codes = {r for r in refusals if r is not None}
            if fits:
                codes.add(rules.ALLOCATED_CARDS_INSUFFICIENT_REQUEST)
            return None, tuple(c for c in rules.HAMI_CODE_ORDER if c in codes)
        for c in sorted(fits, key=lambda c: (c.mem_free, c.cores_free))[: req.gpus]:
            c.take(req, pod_name)
    return trial, ()


def plain_place_all(demands: list[Demand], fleet: Fleet) -> tuple:
    nodes = [rules._empty_node(g) for g in fleet.groups for _ in range(g.nodes)]
    open_nodes = list(range(len(nodes)))
    placed, pending = {}, []
    for must_fit in (True, False):
        for name, d in rules._largest_first(demands, must_fit):
            for pos, index in enumerate(open_nodes):
                trial, _ = plain_fit(d, nodes[index], name)
                if trial is not None:
                    nodes[index][:] = trial
                    if not any(c.slots_free > 0 and c.mem_free > 0 for c in nodes[index]):
                        del open_nodes[pos]
                    placed[name] = index
                    break
            else:
                counts: dict[str, int] = {}
                for cards in nodes:
                    for code in plain_fit(d, cards)[1]:
                        counts[code] = counts.get(code, 0) + 1
                reasons = tuple((c, counts[c]) for c in rules.HAMI_CODE_ORDER if c in counts)
                pending.append((name, d.name, reasons, not must_fit))
    held = sorted((n, k, *h) for n, node in enumerate(nodes) for k, c in enumerate(node) for h in c.held)
    return placed, pending, held


def answers(p: Placement) -> tuple:
    held = sorted((s.node, s.card, s.pod, s.mem_mb, s.cores) for s in p.slices)
    return p.placed, [(x.name, x.demand, x.reasons, x.allowed) for x in p.pending], held


container = st.tuples(
    st.integers(1, 3),  # vGPUs
    st.sampled_from([0, 1000, 10000, 20000, 23034, 30000, 45000, 81920, 90000]),  # MB each
    st.sampled_from([0, 10, 25, 30, 50, 100]),  # cores % each
)
workload = st.tuples(
    st.lists(container, min_size=1, max_size=2),  # one or two GPU containers
    st.integers(1, 12),  # replicas
    st.booleans(),  # must fit
    st.sampled_from([CardTypes(), CardTypes.of(use="A100"), CardTypes.of(nouse="A100"), CardTypes.of(use="H100")]),
)
group = st.tuples(st.sampled_from(MODELS), st.integers(1, 5), st.integers(1, 8))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(group, min_size=1, max_size=3), st.lists(workload, min_size=1, max_size=5))
def test_placement_answers_as_the_plain_routine(groups, workloads):
    fleet = Fleet(tuple(NodeGroup(m, n, c) for m, n, c in groups))
    models = [m for m, _, _ in groups]
    demands = [
        demand(
            f"w{i}",
            [(f"c{k}", {"nvidia.com/gpu": g, "nvidia.com/gpumem": mem, "nvidia.com/gpucores": cores})
             for k, (g, mem, cores) in enumerate(cs)],
            models,
            types=types,
            replicas=replicas,
            must_fit=must_fit,
        )
        for i, (cs, replicas, must_fit, types) in enumerate(workloads)
    ]  # fmt: skip
    placed, pending, held = plain_place_all(demands, fleet)
    got = place_all(demands, fleet)
    assert answers(got) == (placed, pending, held)
    # and `pack`, which the pack and the config validation judge with, stops where it did
    first_pending = next((name for name, _, _, allowed in pending if not allowed), None)
    assert rules.first_unplaceable(demands, fleet) == first_pending


def test_a_fleet_that_refuses_every_pod_is_asked_once_per_demand(monkeypatch):
    """10 workloads x 100 pods on 2,000 nodes that take none: the nodes are asked once per
    workload (and each untouched node's answer once per model), not once per pod."""
    calls = {"n": 0}
    real = rules._fit

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(rules, "_fit", counted)
    l4 = GPU_MODELS["L4"]
    fleet = Fleet.of(l4, 2000, 8)
    spec = [("c", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30000, "nvidia.com/gpucores": 30})]
    demands = [demand(f"w{i}", spec, [l4], replicas=100) for i in range(10)]
    got = place_all(demands, fleet)
    assert len(got.pending) == 1000 and not got.placed
    assert {p.reasons for p in got.pending} == {(("CardInsufficientMemory", 2000),)}
    assert calls["n"] <= 10 * 2000 + 10, calls["n"]  # first pod of each: a scan, and one untouched-node answer
