"""A monotonic clock the test moves: called for the time, `advance` (or `sleep`, for code that
waits with it) to move it."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    sleep = advance
