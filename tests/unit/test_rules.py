"""The rulebook shared by config validation and the policy pack: HAMi's request defaults,
quota, and packing whole pods onto a fleet."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.domain.catalog import GPU_MODELS
from components.domain.requests import (
    Demand,
    GpuRequest,
    PodRequest,
    Quota,
    RequestError,
    parse_request,
    quota_violations,
    total_usage,
)
from components.domain.rules import Fleet, first_unplaceable, fleet_capacity, judge, pod_violations

A100, L4 = GPU_MODELS["A100-80GB"], GPU_MODELS["L4"]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"nvidia.com/gpu": "1"}, GpuRequest(1, 81920, 100)),  # a bare GPU is a whole, exclusive card
        ({"nvidia.com/gpumem": "20000"}, GpuRequest(1, 20000, 0)),  # one vGPU implied, no cores reserved
        ({"nvidia.com/gpucores": "30"}, GpuRequest(1, 81920, 30)),  # memory defaults to the whole card
        ({"nvidia.com/gpumem-percentage": "25"}, GpuRequest(1, 20480, 0)),
        ({"nvidia.com/gpu": 2, "nvidia.com/gpumem": "20k", "nvidia.com/gpucores": 30.0}, GpuRequest(2, 20000, 30)),
        ({"cpu": "1"}, None),
        ({"nvidia.com/gpu": "0"}, None),
    ],
)
def test_hami_defaults(limits, expected):
    assert parse_request(limits, A100) == expected


@pytest.mark.parametrize(
    ("limits", "text"),
    [
        ({"nvidia.com/gpumem": "10Gi"}, "more than HAMi's int32"),
        ({"nvidia.com/gpumem": "1.5"}, "whole number"),
        ({"nvidia.com/gpumem": "-1"}, "must not be negative"),
        ({"nvidia.com/gpucores": "101"}, "must be 0-100"),
        ({"nvidia.com/gpumem-percentage": "120"}, "must be 0-100"),
        ({"nvidia.com/gpumem": True}, "must be a quantity"),
    ],
)
def test_malformed_requests(limits, text):
    with pytest.raises(RequestError, match=text):
        parse_request(limits, A100)


def pod(*reqs: GpuRequest) -> PodRequest:
    return PodRequest(tuple((f"c{i}", r) for i, r in enumerate(reqs)))


def demands(*reqs: GpuRequest) -> list[Demand]:
    return [Demand(f"p{i}", pod(r)) for i, r in enumerate(reqs)]


def test_reference_lab_packing():
    slice_ = GpuRequest(1, 20000, 30)
    one_a100 = Fleet.of(A100, 1, 1)
    assert first_unplaceable(demands(*[slice_] * 3), one_a100) is None
    assert first_unplaceable(demands(*[slice_] * 4), one_a100) == "p3[0]"
    assert first_unplaceable(demands(GpuRequest(1, 90000, 0)), one_a100) == "p0[0]"
    assert first_unplaceable(demands(GpuRequest(2, 1000, 10)), one_a100) == "p0[0]"
    assert first_unplaceable(demands(GpuRequest(2, 1000, 10)), Fleet.of(L4, 1, 2)) is None
    assert first_unplaceable([Demand("d", pod(slice_), replicas=4)], one_a100) == "d[3]"


def test_a_pods_containers_are_never_split_across_nodes():
    whole = GpuRequest(1, 81920, 100)
    two_whole_cards = [Demand("pair", pod(whole, whole))]
    assert first_unplaceable(two_whole_cards, Fleet.of(A100, 2, 1)) == "pair[0]"  # fits only if split
    assert first_unplaceable(two_whole_cards, Fleet.of(A100, 1, 2)) is None
    assert pod_violations(two_whole_cards[0], Fleet.of(A100, 2, 1)) == [
        "its containers together need more than the 1 card(s) of one node (a pod's containers all run on one node)"
    ]


def test_containers_of_one_pod_may_share_a_card():
    assert (
        first_unplaceable([Demand("p", pod(GpuRequest(1, 20000, 30), GpuRequest(1, 20000, 30)))], Fleet.of(A100, 1, 1))
        is None
    )


def test_a_workload_allowed_to_stay_pending_counts_for_quota_not_fit():
    big = Demand("waits", pod(GpuRequest(1, 90000, 10)), must_fit=False)
    verdict = judge([big], Quota(10, 81920, 100), Fleet.of(A100, 1, 1))
    assert verdict.unplaceable is None
    assert verdict.over_quota == ["gpumem MB 90000 > quota 81920"]


def test_usage_and_quota():
    usage = total_usage([Demand("a", pod(GpuRequest(1, 20000, 30)), 3), Demand("b", pod(GpuRequest(2, 1000, 10)), 2)])
    assert usage == Quota(gpus=7, gpumem_mb=64000, gpucores=130)
    assert quota_violations(usage, Quota(10, 81920, 100)) == ["gpucores % 130 > quota 100"]
    assert fleet_capacity(2, 4, L4) == Quota(gpus=80, gpumem_mb=184272, gpucores=800)


requests = st.builds(GpuRequest, gpus=st.integers(1, 2), mem_mb=st.integers(0, 30000), cores=st.integers(0, 100))


@given(st.lists(st.lists(requests, min_size=1, max_size=3), max_size=20), st.integers(1, 3), st.integers(1, 3))
def test_packing_never_exceeds_the_fleet(pods, nodes, cards):
    """Whenever the packer says everything fits, the totals fit the fleet's capacity."""
    ds = [Demand(f"p{i}", pod(*reqs)) for i, reqs in enumerate(pods)]
    fleet = Fleet.of(L4, nodes, cards)
    if first_unplaceable(ds, fleet) is None:
        cap = fleet.capacity
        used = total_usage(ds)
        assert used.gpumem_mb <= cap.gpumem_mb and used.gpucores <= cap.gpucores and used.gpus <= cap.gpus
