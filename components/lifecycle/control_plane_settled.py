"""Waits until a new tenant control plane has stopped moving under Kamaji.

Kamaji reports a TenantControlPlane Ready as soon as its first Deployment is rolled out, then goes
on: it adds Konnectivity's server and the egress selector, applies the addons and kubeadm's
bootstrap objects through the tenant API server, and rolls the Deployment again (three ReplicaSets
in the first minute on the lab). While a rollout swaps the one replica, the NodePort refuses
connections, and the tenant's first client (the stack's own identity) fails with "connection
refused". So what comes next waits until Kamaji's first pass is done in the tenant (its MARKERS
exist) and the API server has then answered `/readyz` without a break for a settle window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from components.kube.client import apps_api_of, http_status, send
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

# Kamaji's last steps in a new tenant: kubeadm's bootstrap ConfigMap, Konnectivity's agent.
MARKERS = (("kube-public", "ConfigMap", "cluster-info"), ("kube-system", "DaemonSet", "konnectivity-agent"))
SETTLE_SECONDS = 30.0
TIMEOUT_SECONDS = 600.0
PROBE_TIMEOUT = (3.0, 5.0)


class ControlPlaneUnsettledError(Exception):
    """The tenant API server did not answer steadily, or Kamaji did not finish, in time."""


@dataclass
class Observation:
    """One look at the tenant: `problem` is empty when it is ready and Kamaji's markers exist."""

    problem: str = ""
    missing: list[str] = field(default_factory=list)


def _readyz(api: Any) -> str:
    """ "" when `/readyz` answers 200, else what it answered."""
    method, url, headers, _body, _post = api.param_serialize("GET", "/readyz", auth_settings=["BearerToken"])
    answer = api.call_api(method, url, headers, _request_timeout=PROBE_TIMEOUT)
    answer.read()
    return "" if answer.status == 200 else f"/readyz {answer.status} {answer.reason or ''}".strip()


def observe(core: CoreV1Api) -> Observation:
    """`/readyz`, then each marker; any failure to ask is the problem seen."""
    try:
        readyz = _readyz(core.api_client)
        if readyz:
            return Observation(problem=readyz)
        apps = apps_api_of(core)
        missing = []
        for namespace, kind, name in MARKERS:
            read = core.read_namespaced_config_map if kind == "ConfigMap" else apps.read_namespaced_daemon_set
            try:
                send(read, name, namespace, _request_timeout=PROBE_TIMEOUT)
            except Exception as exc:
                if http_status(exc) != 404:
                    raise
                missing.append(f"{kind} {namespace}/{name}")
    except Exception as exc:  # noqa: BLE001 - refused, reset, 5xx: all mean "not settled yet"
        status = http_status(exc)
        reason = getattr(exc, "reason", "") or str(exc).splitlines()[0]
        return Observation(problem=f"{status} {reason}" if status else str(reason))
    return Observation(problem=f"not yet made by Kamaji: {', '.join(missing)}" if missing else "", missing=missing)


def wait_settled(
    look: Callable[[], Observation],
    *,
    settle: float = SETTLE_SECONDS,
    timeout: float = TIMEOUT_SECONDS,
    interval: float = 1.0,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    endpoint: str = "the tenant API server",
) -> float:
    """Seconds from the first look to the end of an unbroken `settle` window of good looks."""
    start = clock()
    state: dict[str, Any] = {"since": None, "last": Observation(problem="not asked yet"), "breaks": 0}

    def settled() -> float | None:
        seen = look()
        now = clock()
        if seen.problem:
            if state["since"] is not None:
                state["breaks"] += 1
            state["since"], state["last"] = None, seen
            return None
        if state["since"] is None:
            state["since"] = now
        return (now - start) if now - state["since"] >= settle else None

    try:
        return wait_until(settled, timeout=timeout, interval=interval, what="the control plane to settle", sleep=sleep)
    except TimedOut:
        raise ControlPlaneUnsettledError(
            f"{endpoint} did not serve steadily for {settle:g} s within {timeout:g} s after Kamaji reported the "
            f"control plane Ready (last seen: {state['last'].problem}; {state['breaks']} break(s) after a good "
            "answer). Check the TenantControlPlane's pod in the management cluster (its containers' restarts "
            "and logs) and Kamaji's log."
        ) from None
