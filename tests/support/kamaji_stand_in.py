"""Stand-in for Kamaji's status handling, for engine tests on a test API server with Kamaji's CRD
(the real manager runs in the real-Kamaji tier): what Kamaji's KubernetesDeploymentResource
reports (Provisioning, then Ready with `version.version` set to the spec's; on a version change
Upgrading for `upgrade_seconds`, then Ready at the new version), and the `<tcp>-admin-kubeconfig`
Secret it writes, here holding the test cluster's own admin kubeconfig under both keys, and, in
the tenant (here the same API server), what Kamaji makes there last (the objects the stack's
ControlPlaneSettled gate waits for: components.lifecycle.control_plane_settled.MARKERS). It records
when each TenantControlPlane became Ready at which version."""

from __future__ import annotations

import base64
import threading
import time
from contextlib import suppress

from kubernetes import client

from components.domain.names import admin_kubeconfig_secret
from components.lifecycle.control_plane_settled import MARKERS

GROUP, VERSION, PLURAL = "kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes"


class KamajiStandIn:
    def __init__(self, api: client.ApiClient, admin_kubeconfig: str, upgrade_seconds: float = 2.0):
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.admin_kubeconfig = admin_kubeconfig
        self.upgrade_seconds = upgrade_seconds
        # (monotonic time, namespace/name, version) for each Ready at a version.
        self.ready: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> KamajiStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _status(self, tcp: dict, status: str, version: str | None) -> None:
        meta = tcp["metadata"]
        body = {"status": {"kubernetesResources": {"version": {"status": status, "version": version}}}}
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body)

    def _secret(self, tcp: dict) -> None:
        meta = tcp["metadata"]
        data = base64.b64encode(self.admin_kubeconfig.encode()).decode()
        body = {
            "metadata": {"name": admin_kubeconfig_secret(meta["name"]), "namespace": meta["namespace"]},
            "data": {"admin.conf": data, "super-admin.conf": data},
        }
        with suppress(client.ApiException):
            self.core.create_namespaced_secret(meta["namespace"], body)

    def _markers(self) -> None:
        for namespace, kind, name in MARKERS:
            with suppress(client.ApiException):
                self.core.create_namespace({"metadata": {"name": namespace}})
            with suppress(client.ApiException):
                if kind == "ConfigMap":
                    self.core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
                else:
                    labels = {"k8s-app": name}
                    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
                    self.apps.create_namespaced_daemon_set(
                        namespace,
                        {
                            "metadata": {"name": name},
                            "spec": {"selector": {"matchLabels": labels}, "template": template},
                        },
                    )

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with suppress(client.ApiException):
                for tcp in self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]:
                    if tcp["metadata"].get("deletionTimestamp"):
                        continue
                    want = tcp["spec"]["kubernetes"]["version"]
                    have = ((tcp.get("status") or {}).get("kubernetesResources") or {}).get("version") or {}
                    if have.get("version") == want:
                        continue
                    if have.get("version"):
                        self._status(tcp, "Upgrading", have["version"])
                        time.sleep(self.upgrade_seconds)
                    self._secret(tcp)
                    self._markers()
                    self._status(tcp, "Ready", want)
                    key = f"{tcp['metadata']['namespace']}/{tcp['metadata']['name']}"
                    self.ready.append((time.monotonic(), key, want))
