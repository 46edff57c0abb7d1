"""GpuWorkload: a Pod or Deployment asking HAMi for GPU slices, plus the ReleaseWait that awaits it
(for a Deployment, each rollout: its strategy is the config's `rollout`, see RolloutConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import WorkloadConfig
from components.domain.hami_annotations import NOUSE_GPU_TYPE, USE_GPU_TYPE
from components.domain.names import FAIL_ON_PENDING_ANNOTATION, TENANT_LABEL, WORKLOAD_LABEL
from components.platform.component_options import waits_for
from components.providers.release_wait import ReleaseWait


def pod_spec(w: WorkloadConfig) -> dict[str, Any]:
    """Container limits exactly as configured: HAMi reads limits, and fills in its own defaults."""
    container: dict[str, Any] = {
        "name": w.name,
        "image": w.image,
        "resources": {"limits": {res: str(value) for res, value in w.limits}},
    }
    if w.command:
        container["command"] = list(w.command)
    return {"containers": [container], "terminationGracePeriodSeconds": 5}


def pod_annotations(w: WorkloadConfig) -> dict[str, str]:
    # HAMi does the waiting for the GPU; ReleaseWait bounds it with the workload's own timeout.
    annotations = {"pulumi.com/skipAwait": "true"}
    if w.card_type is not None:
        annotations[USE_GPU_TYPE] = w.card_type
    if w.avoid_card_type is not None:
        annotations[NOUSE_GPU_TYPE] = w.avoid_card_type
    if not w.fail_on_pending:
        annotations[FAIL_ON_PENDING_ANNOTATION] = "false"
    return annotations


def deployment_spec(w: WorkloadConfig, labels: dict[str, str]) -> dict[str, Any]:
    """The Deployment's spec, its rollout strategy included: what the pack and the checks count."""
    return {
        "replicas": w.replicas,
        "selector": {"matchLabels": {WORKLOAD_LABEL: w.name}},
        "strategy": w.strategy,
        "template": {"metadata": {"labels": labels, "annotations": pod_annotations(w)}, "spec": pod_spec(w)},
    }


@dataclass
class GpuWorkloadArgs:
    tenant: str
    workload: WorkloadConfig
    kubeconfig: pulumi.Input[str]
    # A Pod workload is made again when the tenant moves to another version: the upgrade's drain
    # evicts it (no controller brings it back), and it is re-created once HAMi has followed.
    kubernetes_version: str | None = None


class GpuWorkload(pulumi.ComponentResource):
    """Creates the workload in the tenant; `up` waits until HAMi has allocated each of its pods.
    Options: `provider` the tenant's; `depends_on` what the workload is created after."""

    release: ReleaseWait

    def __init__(self, name: str, args: GpuWorkloadArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuWorkload", name, None, opts)
        w = args.workload
        on_tenant = pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts))
        labels = {WORKLOAD_LABEL: w.name, TENANT_LABEL: args.tenant}
        meta = k8s.meta.v1.ObjectMetaArgs(
            name=w.name, namespace=w.namespace, labels=labels, annotations=pod_annotations(w)
        )
        pod_names: list[str] | None = None
        generation: pulumi.Input[int] = 0
        if w.kind == "Pod":
            # One name for the old and the new pod: the old one goes first (a trigger alone
            # replaces create-first, and the original's delete, by name, took the new one).
            again = pulumi.ResourceOptions(replacement_trigger=args.kubernetes_version, delete_before_replace=True)
            workload: pulumi.CustomResource = k8s.core.v1.Pod(
                f"{name}-pod", metadata=meta, spec=pod_spec(w), opts=pulumi.ResourceOptions.merge(on_tenant, again)
            )
            pod_names = [w.name]
        else:
            workload = k8s.apps.v1.Deployment(
                f"{name}-deployment", metadata=meta, spec=deployment_spec(w, labels), opts=on_tenant
            )
            # Every spec change is a new generation: the wait follows each rollout to its end.
            generation = workload.metadata.apply(lambda m: int((m.generation if m else None) or 0))
        self.release = ReleaseWait(
            f"{name}-bind-release",
            kubeconfig=args.kubeconfig,
            namespace=w.namespace,
            workload=w.name,
            workload_uid=workload.metadata.apply(lambda m: (m.uid if m else None) or ""),
            pod_names=pod_names,
            selector=None if pod_names else f"{WORKLOAD_LABEL}={w.name}",
            count=w.replicas,
            generation=generation,
            timeout_seconds=w.wait_seconds,
            fail_on_pending=w.fail_on_pending,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[workload]),
        )
        self.register_outputs({"pods": self.release.pods})
