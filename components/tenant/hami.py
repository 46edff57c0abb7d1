"""Hami: HAMi's chart in one tenant, with the mock device plugin in place of the real one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import versions
from components.config.chart_sources import ChartSource
from components.config.model import CHARTS, POOL_DOCKER, HamiConfig
from components.config.names import HAMI_NAMESPACE, POOL_MODE_LABEL
from components.platform.helm import Chart, HelmReleaseArgs, helm_release
from components.providers.hami_registration import HamiRegistration
from components.providers.webhook_probe import HamiWebhookProbe

# A release name containing "hami" keeps the chart's fullname "hami" (hami-scheduler, ...).
HAMI_RELEASE = "hami"
HAMI = Chart(HAMI_RELEASE, *CHARTS["hami"])


def extender_args(hami: HamiConfig) -> list[str]:
    """The flags the stack adds to HAMi's scheduler extender (the real-HAMi tier runs it with them).

    - `--kube-qps`/`--kube-burst`: every API call of HAMi's Filter and Bind (about ten per pod)
      shares one client limiter, 5 requests/s by default: about half a pod per second;
    - `-v`: at the chart's 4 HAMi logs about two dozen lines per candidate node per pod;
    - the node-lock expiry only takes effect as --node-lock-timeout (the chart's nodeLockExpire
      value is overwritten by that flag's default). The chart's `--debug` is read by nothing.
    """
    return [
        f"--kube-qps={hami.kube_qps}",
        f"--kube-burst={hami.kube_burst}",
        f"-v={hami.log_level}",
        f"--node-lock-timeout={hami.node_lock_timeout}",
    ]


def hami_values(kubernetes_version: str, hami: HamiConfig, real_gpus: bool = False) -> dict[str, Any]:
    """Chart values for a tenant with fake cards (or, `real_gpus`, its own machines' cards).

    - the real NVIDIA device plugin needs NVML and crash-loops without GPUs: off, mock plugin on;
      with real cards the other way round;
    - the scheduler and its certificate jobs run on docker workers only: simulated nodes would
      only pretend to run them, and not-yet-joined machines cannot;
    - kube-scheduler from registry.k8s.io at the tenant's own version (the chart default is a
      mirror registry and an empty tag derived from a cluster version it cannot see), at the
      stack's log level;
    - the extender at HAMI_EXTENDER_IMAGE_TAG (see versions), the chart's other images at the
      chart's own tag (`global.imageTag` would set all three), with the stack's client rate, log
      level, node policy and lock expiry (extender_args);
    - ClusterIP service: the chart's fixed NodePorts would collide between installs.
    """
    on_docker_workers = {POOL_MODE_LABEL: POOL_DOCKER}
    chart_tag = {"tag": versions.HAMI_CHART_IMAGE_TAG}
    return {
        "global": {"imageTag": ""},
        "devicePlugin": {"enabled": real_gpus, "image": chart_tag, "monitor": {"image": chart_tag}},
        "mockDevicePlugin": {"enabled": not real_gpus},
        "scheduler": {
            "nodeSelector": on_docker_workers,
            "patch": {"nodeSelector": on_docker_workers},
            "defaultSchedulerPolicy": {
                "nodeSchedulerPolicy": hami.node_scheduler_policy,
                "gpuSchedulerPolicy": "spread",
            },
            "kubeScheduler": {
                "image": {
                    "registry": versions.KUBE_SCHEDULER_REGISTRY,
                    "repository": versions.KUBE_SCHEDULER_REPOSITORY,
                    "tag": kubernetes_version,
                },
                "extraNewArgs": ["--config=/config/config.yaml", f"-v={hami.log_level}"],
            },
            "extender": {"image": {"tag": versions.HAMI_EXTENDER_IMAGE_TAG}, "extraArgs": extender_args(hami)},
            "service": {"type": "ClusterIP"},
        },
    }


def _revision(status: Any) -> int | None:
    """The Helm revision from a release status (a new revision re-runs the webhook probe)."""
    if status is None:
        return None
    return status.get("revision") if isinstance(status, dict) else getattr(status, "revision", None)


@dataclass
class HamiArgs:
    provider: k8s.Provider
    kubeconfig: pulumi.Input[str]
    kubernetes_version: str
    hami: HamiConfig
    real_gpus: bool
    # Card ids per node that HAMi must register before workloads are created.
    expected_devices: dict[str, list[str]]
    # Nodes and CNI: the scheduler pod needs a Ready node before the release can be ready.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # Where the chart comes from (config `charts.hami`); None: its repository.
    hami_chart: ChartSource | None = None


class Hami(pulumi.ComponentResource):
    """A real Helm release (its webhook certificates come from Helm hook jobs), then two gates:
    the tenant API server reaches HAMi's webhook (through Konnectivity), and HAMi's scheduler
    has registered every fake card. `ready` lists both, for whatever creates GPU pods."""

    release: k8s.helm.v3.Release
    webhook: HamiWebhookProbe
    registration: HamiRegistration

    def __init__(self, name: str, args: HamiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:Hami", name, None, opts)
        self.release = helm_release(
            f"{name}-release",
            HelmReleaseArgs(
                HAMI,
                HAMI_NAMESPACE,
                hami_values(args.kubernetes_version, args.hami, args.real_gpus),
                args.provider,
                depends_on=args.depends_on,
                source=args.hami_chart,
            ),
            parent=self,
        )
        revision = self.release.status.apply(_revision)
        self.webhook = HamiWebhookProbe(
            f"{name}-webhook-probe",
            kubeconfig=args.kubeconfig,
            hami_revision=revision,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.registration = HamiRegistration(
            f"{name}-registration",
            kubeconfig=args.kubeconfig,
            expected=args.expected_devices,
            hami_revision=revision,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.ready: list[pulumi.Resource] = [self.webhook, self.registration]
        self.register_outputs(
            {
                "status": self.release.status,
                "webhook": self.webhook.scheduler_name,
                "registered": self.registration.registered,
            }
        )
