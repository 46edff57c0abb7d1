"""HAMi's real scheduler, run as its chart (2.8.3) runs it with the stack's values, against the
test kube-apiserver (or with the chart's own defaults, for the fleet bench's comparison).

Given a HAMi scheduler binary (cmd/scheduler, path in HAMI_SCHEDULER; CI cannot obtain HAMi,
whose Go module these machines are not served), this starts:
- HAMi's extender + webhook over HTTPS, with the chart's device config, scheduler name and
  flags plus the stack's (components.tenant.hami.extender_args), reading the cluster from
  KUBECONFIG (it has no kubeconfig flag);
- kube-scheduler with the chart's KubeSchedulerConfiguration: profile `hami-scheduler`, HAMi as
  extender (filter and bind verbs, nodeCacheCapable, HAMi's resources ignoredByScheduler);
- HAMi's MutatingWebhookConfiguration with the chart's rules, pointed at the extender's URL;
- the chart's `hami-scheduler` Service (port `monitor`) in hami-system, backed by an Endpoints
  address that is a Pod with the extender's (non-loopback) metrics address, so the registration
  gate reads HAMi's metrics through the API server's service proxy as in the lab.
Nodes carry this project's fake inventory (components.tenant.gpu_inventory).
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from components.config.model import GpuFleet, HamiConfig
from components.domain import hami_annotations as ha
from components.domain.inventory import advertised_resources, node_devices
from components.domain.names import HAMI_NAMESPACE, MOCK_GPU_NODE_LABEL
from components.lifecycle import hami_registration
from components.tenant.hami import extender_args, scheduler_device_config
from tests.support.cluster import TestCluster, add_node, free_port, routable_ip, self_signed, stop_processes
from tests.support.tools import executable_from_env

ENV = "HAMI_SCHEDULER"
SKIP_REASON = (
    f"real-HAMi tier: set {ENV} to a HAMi scheduler binary (cmd/scheduler of Project-HAMi/HAMi); "
    "CI cannot obtain HAMi (its Go module is not served to these machines)"
)
# The nvidia section of the chart's device config (hami-scheduler-device, chart 2.8.3).
MANAGED = (ha.RES_GPU, ha.RES_GPUMEM, ha.RES_GPUCORES, ha.RES_GPUMEM_PERCENTAGE, "nvidia.com/priority")


def binary() -> str | None:
    return executable_from_env(ENV)


def add_gpu_node(cluster: TestCluster, tenant: str, name: str, fleet: GpuFleet) -> list[str]:
    """A node with this project's inventory, as MockGpuInventory writes it, and the resources the
    mock device plugin's registration with its kubelet shows; returns its card ids."""
    add_node(cluster, name)
    core = cluster.core()
    devices = node_devices(tenant, name, fleet)
    labels = dict((ha.GPU_NODE_LABEL, MOCK_GPU_NODE_LABEL))
    core.patch_node(
        name, {"metadata": {"labels": labels, "annotations": {ha.NODE_REGISTER: ha.encode_node_register(devices)}}}
    )
    resources = advertised_resources(fleet)
    core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources}})
    return [d.id for d in devices]


# What the chart (2.8.3) passes when nothing is set: HAMi's client at its 5 requests/s.
CHART_EXTENDER_ARGS = ["--debug", "-v=4"]
CHART_SCHEDULER_VERBOSITY = 4


@dataclass
class RealHami:
    cluster: TestCluster
    path: str
    hami: HamiConfig = field(default_factory=lambda: HamiConfig.model_validate({}))
    # The chart's defaults instead of the stack's values (the lock expiry stays the given one).
    chart_defaults: bool = False
    # More extender flags (the fleet bench's --profiling).
    extra_flags: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)
    port: int = 0
    metrics_port: int = 0

    @property
    def extender_flags(self) -> list[str]:
        if self.chart_defaults:
            return [*CHART_EXTENDER_ARGS, f"--node-lock-timeout={self.hami.node_lock_timeout}"]
        return extender_args(self.hami)

    def start(self) -> RealHami:
        w = self.cluster.workdir / f"hami-{uuid.uuid4().hex[:6]}"
        w.mkdir()
        crt, key = self_signed(w, "hami", "/CN=127.0.0.1", san="IP:127.0.0.1")
        (w / "device-config.yaml").write_text(scheduler_device_config())
        self.port, self.metrics_port = free_port(), free_port()
        ip = routable_ip()
        env = {**self.cluster.env, "KUBECONFIG": str(self.cluster.kubeconfig_path)}
        self._spawn(
            w / "hami-scheduler.log",
            [
                self.path,
                f"--http_bind=127.0.0.1:{self.port}",
                f"--cert_file={crt}",
                f"--key_file={key}",
                f"--scheduler-name={ha.SCHEDULER_NAME}",
                f"--metrics-bind-address={ip}:{self.metrics_port}",
                f"--node-scheduler-policy={'binpack' if self.chart_defaults else self.hami.node_scheduler_policy}",
                "--gpu-scheduler-policy=spread",
                "--force-overwrite-default-scheduler=true",
                f"--device-config-file={w / 'device-config.yaml'}",
                *self.extender_flags,
                *self.extra_flags,
            ],
            env,
        )
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(self.cluster.kubeconfig_path)},
            "profiles": [{"schedulerName": ha.SCHEDULER_NAME}],
            "extenders": [
                {
                    "urlPrefix": f"https://127.0.0.1:{self.port}",
                    "filterVerb": "filter",
                    "bindVerb": "bind",
                    "enableHTTPS": True,
                    "tlsConfig": {"insecure": True},
                    "nodeCacheCapable": True,
                    "weight": 1,
                    "httpTimeout": "30s",
                    "managedResources": [{"name": r, "ignoredByScheduler": True} for r in MANAGED],
                }
            ],
        }
        (w / "kube-scheduler.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            w / "kube-scheduler.log",
            [
                self.cluster._bin("kube-scheduler"),
                f"--config={w / 'kube-scheduler.yaml'}",
                f"--authentication-kubeconfig={self.cluster.kubeconfig_path}",
                f"--authorization-kubeconfig={self.cluster.kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"-v={CHART_SCHEDULER_VERBOSITY if self.chart_defaults else self.hami.log_level}",
            ],
            self.cluster.env,
        )
        self._webhook(crt)
        self._metrics_service(ip)
        self.logdir = w
        return self

    def _spawn(self, log: Path, cmd: list[str], env: dict[str, str]) -> None:
        out = open(log, "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        self.cluster.procs.append(proc)

    def _webhook(self, crt: Path) -> None:
        selector = {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]}
        api = client.AdmissionregistrationV1Api(self.cluster.api_client())
        api.create_mutating_webhook_configuration(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "hami-webhook"},
                "webhooks": [
                    {
                        "name": "vgpu.hami.io",
                        "admissionReviewVersions": ["v1beta1"],
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{self.port}/webhook",
                            "caBundle": base64.b64encode(crt.read_bytes()).decode(),
                        },
                        "failurePolicy": "Ignore",
                        "matchPolicy": "Equivalent",
                        "namespaceSelector": selector,
                        "objectSelector": selector,
                        "reinvocationPolicy": "Never",
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["pods"],
                                "scope": "*",
                            }
                        ],
                        "sideEffects": "None",
                        "timeoutSeconds": 10,
                    }
                ],
            }
        )

    def _metrics_service(self, ip: str) -> None:
        core = self.cluster.core()
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=HAMI_NAMESPACE)))
        except client.ApiException as exc:
            if exc.status != 409:  # a RealHami before this one made it
                raise
        pod = "hami-scheduler-0"
        core.create_namespaced_pod(
            HAMI_NAMESPACE,
            {
                "metadata": {"name": pod, "labels": {"hami.io/webhook": "ignore"}},
                # no scheduler serves this name: the Pod only stands for the address, on no node
                "spec": {
                    "schedulerName": "gpu-tenancy-stand-in",
                    "containers": [{"name": "vgpu-scheduler-extender", "image": "projecthami/hami"}],
                },
            },
        )
        core.patch_namespaced_pod_status(pod, HAMI_NAMESPACE, {"status": {"podIP": ip, "podIPs": [{"ip": ip}]}})
        core.create_namespaced_service(
            HAMI_NAMESPACE,
            {
                "metadata": {"name": "hami-scheduler"},
                "spec": {"ports": [{"name": "monitor", "port": 31993, "targetPort": 9395}]},
            },
        )
        core.create_namespaced_endpoints(
            HAMI_NAMESPACE,
            {
                "metadata": {"name": "hami-scheduler"},
                "subsets": [
                    {
                        "addresses": [
                            {"ip": ip, "targetRef": {"kind": "Pod", "namespace": HAMI_NAMESPACE, "name": pod}}
                        ],
                        "ports": [{"name": "monitor", "port": self.metrics_port}],
                    }
                ],
            },
        )

    def wait_registered(self, expected: dict[str, list[str]], timeout: float = 90) -> dict[str, int]:
        """The project's registration gate, on HAMi's own metrics."""
        return hami_registration.wait_registered(self.cluster.core(), expected, timeout=timeout, interval=1.0)

    def metric_generation(self) -> str:
        text = (
            self.cluster.core()
            .connect_get_namespaced_service_proxy_with_path(
                hami_registration.METRICS_SERVICE, HAMI_NAMESPACE, "metrics", _preload_content=False
            )
            .data.decode()
        )
        return "2.10+ (hami_* names)" if "hami_gpu_memory_limit_bytes" in text else "2.8 (GPUDevice* names)"

    def stop(self) -> None:
        """Stop HAMi and take its webhook and Service away, so that another RealHami can start in
        the same cluster (a webhook left behind would stall every pod creation)."""
        stop_processes(self.procs, timeout=15)
        admission = client.AdmissionregistrationV1Api(self.cluster.api_client())
        core = self.cluster.core()
        for delete in (
            lambda: admission.delete_mutating_webhook_configuration("hami-webhook"),
            lambda: core.delete_namespaced_service("hami-scheduler", HAMI_NAMESPACE),
            lambda: core.delete_namespaced_endpoints("hami-scheduler", HAMI_NAMESPACE),
            lambda: core.delete_namespaced_pod("hami-scheduler-0", HAMI_NAMESPACE, grace_period_seconds=0),
        ):
            try:
                delete()
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
            except Exception:  # the cluster itself may be gone already
                return
