"""The gate between a TenantControlPlane Kamaji reports Ready and the tenant's first client: a
window of good answers, reset by any break, after Kamaji's markers exist (a fake clock)."""

from __future__ import annotations

import time

import pytest

from components.lifecycle.control_plane_settled import ControlPlaneUnsettledError, Observation, wait_settled
from tests.support.clock import FakeClock


def looks(*seen: str):
    """One Observation per look ("" = good), the last repeated."""
    queue = list(seen)

    def look() -> Observation:
        return Observation(problem=queue.pop(0) if len(queue) > 1 else queue[0])

    return look


def test_it_waits_for_a_whole_window_of_good_answers():
    clock = FakeClock()
    waited = wait_settled(looks("connection refused", ""), settle=5, timeout=60, clock=clock, sleep=clock.sleep)
    assert waited == 6  # one refused look, then 5 s of good ones


@pytest.mark.parametrize(
    "problem",
    [
        "connection refused",  # the NodePort while a rollout swaps the one replica
        "503 Service Unavailable",  # /readyz while the new API server starts
        "not yet made by Kamaji: DaemonSet kube-system/konnectivity-agent",
    ],
)
def test_a_break_inside_the_window_starts_it_again(problem):
    clock = FakeClock()
    seen = ["", "", "", problem, ""]
    waited = wait_settled(looks(*seen), settle=5, timeout=60, clock=clock, sleep=clock.sleep)
    assert waited == 3 + 1 + 5  # three good looks lost to the break


def test_it_gives_up_naming_what_it_saw_last():
    with pytest.raises(ControlPlaneUnsettledError) as err:
        wait_settled(
            looks("", "connection refused"),
            settle=5,
            timeout=0.3,
            interval=0.05,
            clock=time.monotonic,
            sleep=time.sleep,
        )
    text = str(err.value)
    assert "connection refused" in text and "1 break(s)" in text and "Kamaji" in text
