"""Hami: HAMi's chart in one tenant, with the mock device plugin in place of the real one, and
its webhook's certificate made by the stack."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config import versions
from components.config.chart_sources import ChartSource
from components.config.model import CHARTS, POOL_DOCKER, HamiConfig
from components.domain import hami_annotations as ha
from components.domain.names import (
    DEVICE_CONFIG_ANNOTATION,
    HAMI_NAMESPACE,
    POOL_MODE_LABEL,
    WEBHOOK_CERTIFICATE_ANNOTATION,
)
from components.lifecycle import webhook_certificate as wc
from components.platform.component_options import waits_for
from components.platform.helm import Chart, HelmReleaseArgs, helm_release
from components.providers.hami_registration import HamiRegistration
from components.providers.webhook_certificate import WebhookCertificate
from components.providers.webhook_probe import HamiWebhookProbe

# A release name containing "hami" keeps the chart's fullname "hami" (hami-scheduler, ...).
HAMI_RELEASE = "hami"
HAMI = Chart(HAMI_RELEASE, *CHARTS["hami"])
# What the chart names after its fullname: the extender's Service (its webhook's too), the Secret
# its pod mounts at /tls, and the MutatingWebhookConfiguration with its one webhook.
HAMI_SCHEDULER_SERVICE = f"{HAMI_RELEASE}-scheduler"
HAMI_TLS_SECRET = f"{HAMI_RELEASE}-scheduler-tls"
HAMI_WEBHOOK_CONFIGURATION = f"{HAMI_RELEASE}-webhook"
HAMI_WEBHOOK = "vgpu.hami.io"
# Where the scheduler extender reads the stack's device config: a file in the Secret the chart
# mounts at /tls (scheduler_device_config says why it is not the chart's).
TLS_MOUNT = "/tls"
DEVICE_CONFIG_FILE = "device-config.yaml"


# HAMi's scheduler pods may not share a node (the chart's required anti-affinity, with leader
# election on), and its Deployment rolls with Kubernetes' defaults (maxUnavailable 25% of one
# replica: 0): on a tenant with one node a new pod waits for the old one's node forever, so every
# change of its values (a certificate, a version) stalls the release. The old pod goes first
# instead: HAMi schedules nothing for the seconds a restart takes; the gates after the release
# (its webhook, its registered cards) wait for the new one.
SCHEDULER_ROLLOUT = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}


def scheduler_device_config() -> str:
    """The device config HAMi's scheduler extender reads, the NVIDIA section alone, as chart
    2.8.3 renders it with the values hami_values leaves at the chart's defaults.

    The chart's own config is read by its device plugins too, and it is theirs: its `vnpus` is
    the list that the mock device plugin 1.0.1 and HAMi 2.8.3 parse, while the extender at
    HAMI_EXTENDER_IMAGE_TAG (v2.10.0) reads `vnpus` as a map and exits at start on the chart's
    ("cannot unmarshal !!seq into ascend.VNPUs"). The extender is pointed at this one instead
    (a later --device-config-file wins). MIG geometries are left out: the stack runs no MIG mode.
    """
    nvidia = {
        "resourceCountName": ha.RES_GPU,
        "resourceMemoryName": ha.RES_GPUMEM,
        "resourceMemoryPercentageName": ha.RES_GPUMEM_PERCENTAGE,
        "resourceCoreName": ha.RES_GPUCORES,
        "resourcePriorityName": ha.RES_PRIORITY,
        "overwriteEnv": False,
        "defaultMemory": 0,
        "defaultCores": 0,
        "defaultGPUNum": 1,
        "preConfiguredDeviceMemory": 0,
        "memoryFactor": 1,
        "deviceSplitCount": 10,
        "deviceMemoryScaling": 1,
        "deviceCoreScaling": 1,
        "gpuCorePolicy": "default",
        "libCudaLogLevel": 1,
        "runtimeClassName": "",
    }
    return yaml.safe_dump({"nvidia": nvidia}, sort_keys=False)


def scheduler_files() -> dict[str, str]:
    """What the stack puts beside the webhook certificate for the scheduler extender to read."""
    return {DEVICE_CONFIG_FILE: scheduler_device_config()}


def _digest(files: Mapping[str, str]) -> str:
    return hashlib.sha256(yaml.safe_dump(dict(files), sort_keys=True).encode()).hexdigest()[:16]


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


def hami_values(
    kubernetes_version: str, hami: HamiConfig, real_gpus: bool = False, system_pool_mode: str = POOL_DOCKER
) -> dict[str, Any]:
    """Chart values for a tenant with fake cards (or, `real_gpus`, its own machines' cards).

    - the real NVIDIA device plugin needs NVML and crash-loops without GPUs: off, mock plugin on;
      with real cards the other way round;
    - the scheduler runs where the tenant's system pods run (`system_pool_mode`): its docker
      workers, or, in a tenant of external pools only, the team's machines; never on simulated
      nodes, which would only pretend to run it;
    - no certificate jobs (`patch`): the stack makes the webhook's certificate (trusted_release);
    - kube-scheduler from registry.k8s.io at the tenant's own version (the chart default is a
      mirror registry and an empty tag derived from a cluster version it cannot see), at the
      stack's log level;
    - the extender at HAMI_EXTENDER_IMAGE_TAG (see versions), the chart's other images at the
      chart's own tag (`global.imageTag` would set all three), with the stack's client rate, log
      level, node policy and lock expiry (extender_args), reading the stack's device config
      (scheduler_device_config), which trusted_release puts beside the certificate;
    - ClusterIP service: the chart's fixed NodePorts would collide between installs.
    """
    on_system_nodes = {POOL_MODE_LABEL: system_pool_mode}
    chart_tag = {"tag": versions.HAMI_CHART_IMAGE_TAG}
    return {
        "global": {"imageTag": ""},
        "devicePlugin": {"enabled": real_gpus, "image": chart_tag, "monitor": {"image": chart_tag}},
        "mockDevicePlugin": {"enabled": not real_gpus},
        "scheduler": {
            "nodeSelector": on_system_nodes,
            "patch": {"enabled": False},
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
            "extender": {
                "image": {"tag": versions.HAMI_EXTENDER_IMAGE_TAG},
                "extraArgs": [*extender_args(hami), f"--device-config-file={TLS_MOUNT}/{DEVICE_CONFIG_FILE}"],
            },
            "service": {"type": "ClusterIP"},
        },
    }


@dataclass
class TrustedRelease:
    """HAMi's release with the webhook certificate the stack made for it."""

    namespace: k8s.core.v1.Namespace
    certificate: WebhookCertificate
    release: k8s.helm.v3.Release
    ca_bundle: k8s.admissionregistration.v1.MutatingWebhookConfigurationPatch


def trusted_release(
    name: str,
    args: HelmReleaseArgs,
    parent: pulumi.Resource,
    files: Mapping[str, str] | None = None,
    after: Sequence[pulumi.Resource] = (),
) -> TrustedRelease:
    """The chart `args` names with its webhook's certificate made here, in this order:
    - the namespace, owned by the stack (Helm's create-namespace would leave it behind on destroy);
    - the certificate (a CA of this tenant's own) and the Secret the scheduler mounts at /tls,
      with `files` beside it, before the chart, so its pod starts with them;
    - the release, its scheduler's pods annotated with the certificate's fingerprint and the
      files' digest (it reads /tls at start only: a new certificate or file restarts it);
    - the CA in the chart's webhook configuration: a server-side apply of that one field, so the
      chart keeps the rest, and Helm's upgrades keep it (their manifests never name it).
    Until the last step the API server cannot verify the webhook and (failurePolicy Ignore)
    skips it: whatever makes GPU pods waits for the probe, which comes after it.
    The release comes `after` those resources too; each resource's provider is `parent`'s."""
    namespace = k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={"name": args.namespace},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    cert = WebhookCertificate(
        f"{name}-webhook-certificate",
        dns_names=wc.service_names(HAMI_SCHEDULER_SERVICE, args.namespace),
        ip_addresses=[wc.LOOPBACK],
        valid_days=wc.VALID_DAYS,
        renew_days=wc.RENEW_DAYS,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    secret = k8s.core.v1.Secret(
        f"{name}-webhook-tls",
        metadata={"name": HAMI_TLS_SECRET, "namespace": args.namespace},
        type="kubernetes.io/tls",
        string_data={**(files or {}), "tls.crt": cert.tls_crt, "tls.key": cert.tls_key, "ca.crt": cert.ca_crt},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[namespace]),
    )
    scheduler = {**args.values.get("scheduler", {})}
    scheduler["podAnnotations"] = {
        **scheduler.get("podAnnotations", {}),
        WEBHOOK_CERTIFICATE_ANNOTATION: cert.fingerprint,
        **({DEVICE_CONFIG_ANNOTATION: _digest(files)} if files else {}),
    }
    release = helm_release(
        f"{name}-release",
        replace(args, values={**args.values, "scheduler": scheduler}),
        pulumi.ResourceOptions(parent=parent, depends_on=[*after, secret]),
    )
    ca_bundle = k8s.admissionregistration.v1.MutatingWebhookConfigurationPatch(
        f"{name}-webhook-ca",
        metadata={"name": HAMI_WEBHOOK_CONFIGURATION},
        webhooks=[
            {
                "name": HAMI_WEBHOOK,
                "client_config": {"ca_bundle": cert.ca_crt.apply(lambda pem: base64.b64encode(pem.encode()).decode())},
            }
        ],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[release]),
    )
    return TrustedRelease(namespace, cert, release, ca_bundle)


def _revision(status: Any) -> int | None:
    """The Helm revision from a release status (a new revision re-runs the webhook probe)."""
    if status is None:
        return None
    return status.get("revision") if isinstance(status, dict) else getattr(status, "revision", None)


@dataclass
class HamiArgs:
    kubeconfig: pulumi.Input[str]
    kubernetes_version: str
    hami: HamiConfig
    real_gpus: bool
    # Card ids per node that HAMi must register before workloads are created.
    expected_devices: dict[str, list[str]]
    # Where the chart comes from (config `charts.hami`); None: its repository.
    hami_chart: ChartSource | None = None
    # The pool mode of the nodes its scheduler runs on (TenantConfig.system_pool_mode).
    system_pool_mode: str = POOL_DOCKER


class Hami(pulumi.ComponentResource):
    """HAMi's namespace and webhook certificate, a real Helm release, the certificate's CA in its
    webhook configuration, then two gates: the tenant API server reaches HAMi's webhook (through
    Konnectivity, trusting that CA), and HAMi's scheduler has registered every fake card. `ready`
    lists both, for whatever creates GPU pods. Options: `provider` the tenant's; `depends_on` the
    nodes and CNI (the scheduler pod needs a Ready node before the release can be ready)."""

    namespace: k8s.core.v1.Namespace
    certificate: WebhookCertificate
    release: k8s.helm.v3.Release
    ca_bundle: k8s.admissionregistration.v1.MutatingWebhookConfigurationPatch
    rollout: k8s.apps.v1.DeploymentPatch
    webhook: HamiWebhookProbe
    registration: HamiRegistration

    def __init__(self, name: str, args: HamiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:Hami", name, None, opts)
        trusted = trusted_release(
            name,
            HelmReleaseArgs(
                HAMI,
                HAMI_NAMESPACE,
                hami_values(args.kubernetes_version, args.hami, args.real_gpus, args.system_pool_mode),
                args.hami_chart,
            ),
            parent=self,
            files=scheduler_files(),
            after=waits_for(opts),
        )
        self.namespace, self.certificate, self.release = trusted.namespace, trusted.certificate, trusted.release
        self.ca_bundle = trusted.ca_bundle
        self.rollout = k8s.apps.v1.DeploymentPatch(
            f"{name}-scheduler-rollout",
            # Helm made the Deployment, so its field manager holds the defaulted strategy: taken
            # over (Helm's upgrades never name the field, and leave it as it is).
            metadata={
                "name": HAMI_SCHEDULER_SERVICE,
                "namespace": HAMI_NAMESPACE,
                "annotations": {"pulumi.com/patchForce": "true"},
            },
            spec={"strategy": SCHEDULER_ROLLOUT},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        revision = self.release.status.apply(_revision)
        self.webhook = HamiWebhookProbe(
            f"{name}-webhook-probe",
            kubeconfig=args.kubeconfig,
            hami_revision=revision,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release, self.ca_bundle, self.rollout]),
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
