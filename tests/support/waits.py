"""Waiting in tests, through the project's one helper (components.kube.waiting.wait_until)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.kube.waiting import TimedOut, wait_until


def settles(check: Callable[[], Any], *, timeout: float, interval: float = 0.5) -> bool:
    """True once `check()` is truthy within `timeout`, False at the deadline: for a test that
    then asserts what it waited for, with its own message."""
    try:
        return bool(wait_until(check, timeout=timeout, interval=interval))
    except TimedOut:
        return False
