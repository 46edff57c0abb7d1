"""The quota arithmetic shared by config validation and the policy pack."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.gpu.catalog import GPU_MODELS
from components.gpu.rules import (
    GpuRequest,
    Quota,
    RequestError,
    first_unplaceable,
    fleet_capacity,
    parse_request,
    quota_violations,
    total_usage,
)

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


def test_reference_lab_packing():
    slice_ = GpuRequest(1, 20000, 30)
    assert first_unplaceable([(f"p{i}", slice_) for i in range(3)], 1, 1, A100) is None
    assert first_unplaceable([(f"p{i}", slice_) for i in range(4)], 1, 1, A100) == "p3"
    assert first_unplaceable([("big", GpuRequest(1, 90000, 0))], 1, 1, A100) == "big"
    assert first_unplaceable([("two", GpuRequest(2, 1000, 10))], 1, 1, A100) == "two"
    assert first_unplaceable([("two", GpuRequest(2, 1000, 10))], 1, 2, L4) is None


def test_usage_and_quota():
    usage = total_usage([(GpuRequest(1, 20000, 30), 3), (GpuRequest(2, 1000, 10), 2)])
    assert usage == Quota(gpus=7, gpumem_mb=64000, gpucores=130)
    assert quota_violations(usage, Quota(10, 81920, 100)) == ["gpucores % 130 > quota 100"]
    assert fleet_capacity(2, 4, L4) == Quota(gpus=80, gpumem_mb=184272, gpucores=800)


requests = st.builds(GpuRequest, gpus=st.integers(1, 2), mem_mb=st.integers(0, 30000), cores=st.integers(0, 100))


@given(st.lists(requests, max_size=25), st.integers(1, 3), st.integers(1, 3))
def test_packing_never_exceeds_the_fleet(reqs, nodes, cards):
    """Whenever the packer says everything fits, the totals fit the fleet's capacity."""
    pods = [(f"p{i}", r) for i, r in enumerate(reqs)]
    if first_unplaceable(pods, nodes, cards, L4) is None:
        cap = fleet_capacity(nodes, cards, L4)
        used = total_usage((r, 1) for r in reqs)
        assert used.gpumem_mb <= cap.gpumem_mb and used.gpucores <= cap.gpucores and used.gpus <= cap.gpus
