"""The HAMi annotation codec: golden strings from HAMi's formats, round trips, garbage."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.config.model import GpuFleet
from components.domain import hami_annotations as ha
from components.domain.catalog import GPU_MODELS
from components.domain.inventory import node_devices

A100_GOLDEN = (
    '[{"id":"GPU-teama-n1-0","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
)


def test_register_golden_a100():
    dev = ha.DeviceInfo(id="GPU-teama-n1-0", count=10, devmem=81920, devcore=100, type="NVIDIA A100-SXM4-80GB")
    assert ha.encode_node_register([dev]) == A100_GOLDEN
    assert ha.decode_node_register(A100_GOLDEN) == [dev]


def test_register_keys_decode_case_insensitively_like_go():
    text = '[{"ID":"g0","Count":10,"DevMem":23034,"DevCore":100,"Type":"NVIDIA L4","Health":true,"Mode":"hami-core"}]'
    (dev,) = ha.decode_node_register(text)
    assert (dev.id, dev.count, dev.devmem, dev.devcore, dev.type, dev.health) == (
        "g0",
        10,
        23034,
        100,
        "NVIDIA L4",
        True,
    )


def test_inventory_for_l4_node_uses_catalogue_figures():
    fleet = GpuFleet(model=GPU_MODELS["L4"], cards_per_node=2)
    text = ha.encode_node_register(node_devices("team-b", "gpu-lab-team-b-worker-0", fleet))
    assert text == (
        '[{"id":"GPU-team-b-gpu-lab-team-b-worker-0-0","index":0,"count":10,"devmem":23034,"devcore":100,'
        '"type":"NVIDIA L4","numa":0,"mode":"hami-core","health":true},'
        '{"id":"GPU-team-b-gpu-lab-team-b-worker-0-1","index":1,"count":10,"devmem":23034,"devcore":100,'
        '"type":"NVIDIA L4","numa":0,"mode":"hami-core","health":true}]'
    )


def test_lock_golden_and_holder():
    value = "2026-12-02T13:50:00Z,default,pod-a"
    lock = ha.decode_node_lock(value)
    assert lock == ha.NodeLock(datetime(2026, 12, 2, 13, 50, tzinfo=UTC), "default", "pod-a")
    assert ha.encode_node_lock(lock) == value
    assert ha.lock_held_by(value, "default", "pod-a")
    assert not ha.lock_held_by(value, "default", "pod-b")
    assert not ha.lock_held_by(value, "other", "pod-a")


def test_legacy_bare_time_lock_names_no_pod():
    lock = ha.decode_node_lock("2026-12-02T13:50:00+08:00")
    assert lock.namespace is None and lock.pod is None
    assert not ha.lock_held_by("2026-12-02T13:50:00Z", "default", "pod-a")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "yesterday,default,pod",
        "2026-12-02T13:50:00Z,default",
        "2026-12-02T13:50:00Z,,p",
        "2026-12-02T13:50:00,ns,p",
        "a,b,c,d",
    ],
)
def test_malformed_locks_raise_format_error(bad):
    with pytest.raises(ha.AnnotationFormatError):
        ha.decode_node_lock(bad)


def test_pod_devices_golden():
    value = "GPU-teama-n1-0,NVIDIA,10000,30:;"
    assert ha.decode_pod_devices(value) == [[ha.ContainerDevice("GPU-teama-n1-0", 10000, 30)]]
    assert ha.encode_pod_devices([[ha.ContainerDevice("GPU-teama-n1-0", 10000, 30)]]) == value
    # a container without GPUs keeps an empty slot
    assert ha.decode_pod_devices(";GPU-x,NVIDIA,1,2:;") == [[], [ha.ContainerDevice("GPU-x", 1, 2)]]


ids = st.text(alphabet=st.characters(blacklist_characters=",:;", blacklist_categories=("Cs",)), min_size=1, max_size=20)
nat = st.integers(min_value=0, max_value=2**31 - 1)
devices = st.builds(
    ha.DeviceInfo,
    id=ids,
    count=nat,
    devmem=nat,
    devcore=nat,
    type=st.text(max_size=30),
    index=nat,
    numa=nat,
    mode=st.sampled_from(["hami-core", "mig", "mps"]),
    health=st.booleans(),
)


@given(st.lists(devices, max_size=8))
def test_register_round_trip(devs):
    assert ha.decode_node_register(ha.encode_node_register(devs)) == devs


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1), timezones=st.just(UTC)),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True),
)
def test_lock_round_trip(when, ns, pod):
    lock = ha.NodeLock(when.replace(microsecond=0), ns, pod)
    assert ha.decode_node_lock(ha.encode_node_lock(lock)) == lock


uuids = st.from_regex(r"[A-Za-z0-9-]{1,20}", fullmatch=True)
slices = st.builds(ha.ContainerDevice, uuid=uuids, usedmem=nat, usedcores=st.integers(0, 100))


@given(st.lists(st.lists(slices, max_size=3), max_size=4))
def test_pod_devices_round_trip(containers):
    assert ha.decode_pod_devices(ha.encode_pod_devices(containers)) == containers


@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1"))))
def test_garbage_never_crashes_decoders(text):
    for decode in (ha.decode_node_register, ha.decode_node_lock, ha.decode_pod_devices):
        try:
            decode(text)
        except ha.AnnotationFormatError:
            pass


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=20,
    )
)
def test_json_garbage_never_crashes_register_decoder(value):
    import json

    try:
        ha.decode_node_register(json.dumps(value))
    except ha.AnnotationFormatError:
        pass
