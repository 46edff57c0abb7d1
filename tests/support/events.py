"""A Kubernetes object's events, as the tests read them to say why a pod did not run."""

from __future__ import annotations

from typing import Any


def events(core: Any, name: str, namespace: str = "default") -> list[tuple[str, str]]:
    """(reason, message) of each event about the object named `name` in `namespace`."""
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.reason, e.message) for e in items]
