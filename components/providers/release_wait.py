"""ReleaseWait: a Python dynamic provider that waits for HAMi's allocation of a workload.

For each pod of the workload it waits until HAMi has bound it and the allocation is finished
(bind-phase success: the tenant's release controller on fake cards, the device plugin on real
ones); for a Deployment, the pods of the pod template the stack applied (its `generation`
input changes with every spec change, so each rollout is awaited until its old pods are
gone). It writes nothing itself, so the controller stays the one writer of HAMi's lock and bind
phase. A pod still unbound at the deadline is reported with HAMi's own reason per node: as
outputs, and, with `fail_on_pending`, as the error that stops the update. A pod HAMi marked
failed, one bound but never released, or one placed without HAMi always fails the update.
The kubeconfig is a secret input, echoed in the outputs so a later update can use it; a new one
alone is stored without waiting again (components.providers.base: CONNECTION). No client is kept
on the provider object (its __dict__ is pickled into the state). This module is imported by
the provider process: importing it creates no resources and does no I/O.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, UpdateResult

from components.kube.client import apps_api_of, core_api
from components.lifecycle import release_wait as ww
from components.providers.base import Provider, ProviderResource

WAIT_INPUTS = ("namespace", "pod_names", "selector", "count", "workload_uid", "generation")
# Stacks made before the rename hold the resource under this type: the alias keeps them.
PREVIOUS_TYPE = "pulumi-python:dynamic/gpu-tenancy:BindRelease"


class PendingPodsError(Exception):
    """Pods that HAMi did not bind before the deadline, with the scheduler's reasons."""


def _run(props: dict[str, Any]) -> dict[str, Any]:
    core = core_api(props["kubeconfig"])
    generation = int(props.get("generation") or 0)
    results = ww.wait_for_pods(
        core,
        props["namespace"],
        timeout=float(props["timeout_seconds"]),
        names=list(props["pod_names"]) if props.get("pod_names") else None,
        selector=props.get("selector") or None,
        count=int(props.get("count") or 0),
        rollout=ww.Rollout(props["workload"], generation) if generation else None,
        apps=apps_api_of(core) if generation else None,
    )
    pods = [
        {"name": r.name, "node": r.outcome.node or "", "status": r.outcome.status, "reason": r.outcome.detail}
        for r in results
    ]
    failed = [p for p in pods if p["status"] == ww.FAILED]
    if failed:
        lines = "; ".join(f"{props['namespace']}/{p['name']} on {p['node']}: {p['reason']}" for p in failed)
        raise PendingPodsError(f"{len(failed)} pod(s) whose GPU allocation HAMi marked failed: {lines}")
    broken = [p for p in pods if p["status"] in (ww.ALLOCATING, ww.NO_HAMI)]
    if broken:
        lines = "; ".join(f"{props['namespace']}/{p['name']}: {p['reason']}" for p in broken)
        raise PendingPodsError(f"{len(broken)} pod(s) bound but not released by HAMi's allocation: {lines}")
    pending = [p for p in pods if p["status"] == ww.NOT_BOUND]
    leaving = [p for p in pods if p["status"] == ww.LEAVING]
    within = f"within {float(props['timeout_seconds']):g} s"
    if pending and props.get("fail_on_pending", True):
        lines = "; ".join(f"{props['namespace']}/{p['name'] or '?'}: {p['reason']}" for p in pending)
        also = f" (and {len(leaving)} pod(s) of the previous rollout still there)" if leaving else ""
        raise PendingPodsError(f"{len(pending)} pod(s) not scheduled by HAMi {within}: {lines}{also}")
    if leaving and props.get("fail_on_pending", True):
        lines = "; ".join(f"{props['namespace']}/{p['name']} ({p['reason'].split(',')[0]})" for p in leaving)
        raise PendingPodsError(
            f"the rollout of {props['workload']} did not finish {within}: its new pods are bound, "
            f"{len(leaving)} pod(s) it replaces are still there: {lines}"
        )
    return {**props, "pods": pods, "pending": len(pending) + len(leaving)}


class ReleaseWaitProvider(Provider):
    REPLACES = ("namespace", "workload", "workload_uid")
    UPDATES = (*WAIT_INPUTS, "timeout_seconds", "fail_on_pending")
    OUTPUTS = ("pods", "pending")

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = _run(props)
        return CreateResult(id_=f"{props['namespace']}/{props['workload']}", outs=outs)

    def redo(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=_run(news))

    # No remove: nothing to undo, the pods (and with them their claim on the cards) go with the
    # workload, so a destroy never asks the tenant.


class ReleaseWait(ProviderResource, module="gpu-tenancy", name="ReleaseWait"):
    """Waits until HAMi has bound and finished allocating each pod of one workload."""

    pods: pulumi.Output[list[dict[str, Any]]]
    pending: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        namespace: str,
        workload: str,
        workload_uid: pulumi.Input[str],
        pod_names: list[str] | None = None,
        selector: str | None = None,
        count: int = 0,
        generation: pulumi.Input[int] = 0,
        timeout_seconds: int = 120,
        fail_on_pending: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            ReleaseWaitProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "namespace": namespace,
                "workload": workload,
                "workload_uid": workload_uid,
                "pod_names": pod_names or [],
                "selector": selector or "",
                "count": count,
                "generation": generation,
                "timeout_seconds": timeout_seconds,
                "fail_on_pending": fail_on_pending,
            },
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=PREVIOUS_TYPE)])),
        )
