"""KamajiPlatform: cert-manager, then Kamaji with its default etcd DataStore, at pinned versions."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import versions

CERT_MANAGER_NAMESPACE = "cert-manager"
KAMAJI_NAMESPACE = "kamaji-system"
# The release must be named "kamaji": the chart's CRDs hard-wire kamaji-system/kamaji-* names.
KAMAJI_RELEASE = "kamaji"
DEFAULT_DATASTORE = "default"
HELM_TIMEOUT_SECONDS = 900


def cert_manager_values() -> dict[str, Any]:
    return {"crds": {"enabled": True}}


def kamaji_values() -> dict[str, Any]:
    """Chart values: image pinned (the chart alone would pull :latest with pullPolicy Always)."""
    return {
        "image": {"tag": versions.KAMAJI_IMAGE_TAG, "pullPolicy": "IfNotPresent"},
        "telemetry": {"disabled": True},
        "defaultDatastoreName": DEFAULT_DATASTORE,
        # The chart's 100Mi limit is known to OOM; a lab with two tenants needs a little more.
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "64Mi"},
        },
        "kamaji-etcd": {"deploy": True, "datastore": {"enabled": True, "name": DEFAULT_DATASTORE}},
    }


class KamajiPlatform(pulumi.ComponentResource):
    """cert-manager (ready, CRDs in place) -> Kamaji + default DataStore, as real Helm releases.

    Real releases (helm.v3.Release), not rendered charts: kamaji-etcd's setup jobs are Helm
    hooks. Tenants depend on `release`, so on destroy they are deleted (and awaited) before
    Kamaji, its webhooks and the DataStore go.
    """

    release: k8s.helm.v3.Release
    datastore_name: str

    def __init__(self, name: str, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:KamajiPlatform", name, None, opts)
        self.cert_manager = k8s.helm.v3.Release(
            f"{name}-cert-manager",
            name="cert-manager",
            chart=versions.CERT_MANAGER_CHART,
            version=versions.CERT_MANAGER_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.CERT_MANAGER_REPO),
            namespace=CERT_MANAGER_NAMESPACE,
            create_namespace=True,
            values=cert_manager_values(),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.release = k8s.helm.v3.Release(
            f"{name}-kamaji",
            name=KAMAJI_RELEASE,
            chart=versions.KAMAJI_CHART,
            version=versions.KAMAJI_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.KAMAJI_REPO),
            namespace=KAMAJI_NAMESPACE,
            create_namespace=True,
            values=kamaji_values(),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.cert_manager]),
        )
        self.datastore_name = DEFAULT_DATASTORE
        self.register_outputs({"kamaji": self.release.status})
