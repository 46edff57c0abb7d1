"""The one way this project waits and retries: tenacity, wrapped in two names that say what.

- `wait_until(check, timeout=...)`: call `check` until it returns something truthy; at the
  deadline raise `TimedOut`, which carries the last value so a caller can say what was missing.
- `retry_on_conflict(fn)`: run `fn` again while the API server answers 409 (another writer
  changed the object between our read and our resourceVersion-guarded write).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import tenacity

from components.kube.client import http_status

T = TypeVar("T")
CONFLICT_ATTEMPTS = 8


class TimedOut(Exception):
    """`check` never returned a truthy value within the timeout; `last` is what it returned last."""

    def __init__(self, what: str, timeout: float, last: Any):
        super().__init__(f"timed out after {timeout:g} s waiting for {what}")
        self.what = what
        self.timeout = timeout
        self.last = last


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.5,
    what: str = "the condition",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`check()`'s first truthy value; an exception from `check` ends the wait at once."""

    def timed_out(state: tenacity.RetryCallState) -> T:
        raise TimedOut(what, timeout, state.outcome.result() if state.outcome else None)

    return tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(interval),
        retry=tenacity.retry_if_result(lambda value: not value),
        sleep=sleep,
        retry_error_callback=timed_out,
    )(check)


def retry_on_conflict(fn: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """`fn()`, again while it raises a 409; after `attempts` the last 409 is raised."""
    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        retry=tenacity.retry_if_exception(lambda exc: http_status(exc) == 409),
        reraise=True,
    )(fn)
