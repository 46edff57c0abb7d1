"""KamajiPlatform: cert-manager, then Kamaji, at pinned versions; on a lab, with its default etcd
DataStore every tenant shares (a platform gives each team a DataStore of its own, TeamDataStore)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import versions
from components.config.chart_sources import ChartSource
from components.config.model import CHARTS
from components.platform.component_options import waits_for
from components.platform.helm import Chart, HelmReleaseArgs, helm_release
from components.providers.datastore_teardown import DataStoreTeardown

CERT_MANAGER_NAMESPACE = "cert-manager"
KAMAJI_NAMESPACE = "kamaji-system"
# The release must be named "kamaji": the chart's CRDs hard-wire kamaji-system/kamaji-* names.
KAMAJI_RELEASE = "kamaji"
DEFAULT_DATASTORE = "default"
CERT_MANAGER = Chart("cert-manager", *CHARTS["certManager"])
KAMAJI = Chart(KAMAJI_RELEASE, *CHARTS["kamaji"])


def cert_manager_values() -> dict[str, Any]:
    return {"crds": {"enabled": True}}


def kamaji_etcd_image(ref: str, key: str = "image") -> dict[str, str]:
    """One image in kamaji-etcd's values: the repository under `key`, and the tag."""
    repository, tag = ref.rsplit(":", 1)
    return {key: repository, "tag": tag}


def kamaji_values(shared_datastore: bool = True) -> dict[str, Any]:
    """Chart values: image pinned (the chart alone would pull :latest with pullPolicy Always); the
    shared etcd and its default DataStore on a lab only (`shared_datastore`): on a platform, no
    default, so a control plane that names no DataStore of its own gets none."""
    if not shared_datastore:
        return {**kamaji_values(), "defaultDatastoreName": "", "kamaji-etcd": {"deploy": False}}
    return {
        "image": {"tag": versions.KAMAJI_IMAGE_TAG, "pullPolicy": "IfNotPresent"},
        "telemetry": {"disabled": True},
        "defaultDatastoreName": DEFAULT_DATASTORE,
        # The chart's 100Mi limit is known to OOM; a lab with two tenants needs a little more.
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "64Mi"},
        },
        "kamaji-etcd": {
            "deploy": True,
            "datastore": {"enabled": True, "name": DEFAULT_DATASTORE},
            # Its images pinned (versions.KAMAJI_ETCD_IMAGES). cfssl and kubectl have no pull policy
            # key: a tag other than `latest` makes theirs IfNotPresent.
            "image": {**kamaji_etcd_image(versions.KAMAJI_ETCD_IMAGE, "repository"), "pullPolicy": "IfNotPresent"},
            "jobs": {
                "cfssl": kamaji_etcd_image(versions.KAMAJI_ETCD_CFSSL_IMAGE),
                "kubectl": kamaji_etcd_image(versions.KAMAJI_ETCD_KUBECTL_IMAGE),
                "etcd": {**kamaji_etcd_image(versions.KAMAJI_ETCD_CLIENT_IMAGE), "pullPolicy": "IfNotPresent"},
            },
        },
    }


@dataclass
class KamajiPlatformArgs:
    # The management cluster's kubeconfig: the DataStore's teardown asks Kamaji with it.
    kubeconfig: pulumi.Input[str]
    # Where each chart comes from (config `charts.certManager`, `charts.kamaji`); None: its repository.
    cert_manager_chart: ChartSource | None = None
    kamaji_chart: ChartSource | None = None
    # A lab's one etcd for every tenant (False on a platform: each team has its own).
    shared_datastore: bool = True


class KamajiPlatform(pulumi.ComponentResource):
    """cert-manager (ready, CRDs in place) -> Kamaji + default DataStore, as real Helm releases.

    Real releases (helm.v3.Release), not rendered charts: kamaji-etcd's setup jobs are Helm
    hooks. Tenants depend on `datastore` (which depends on the release), so on destroy they are
    deleted (and awaited) before the DataStore, and the DataStore before Kamaji and its webhooks.
    Options: `provider` the management cluster's; `depends_on` what the cluster must have first
    (the management node's StorageClass, for the DataStore's claims).
    """

    release: k8s.helm.v3.Release
    datastore_name: str
    datastore: DataStoreTeardown | None

    def __init__(self, name: str, args: KamajiPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:KamajiPlatform", name, None, opts)
        first = waits_for(opts)
        self.cert_manager = helm_release(
            f"{name}-cert-manager",
            HelmReleaseArgs(CERT_MANAGER, CERT_MANAGER_NAMESPACE, cert_manager_values(), args.cert_manager_chart),
            pulumi.ResourceOptions(parent=self, depends_on=first),
        )
        self.release = helm_release(
            f"{name}-kamaji",
            HelmReleaseArgs(KAMAJI, KAMAJI_NAMESPACE, kamaji_values(args.shared_datastore), args.kamaji_chart),
            pulumi.ResourceOptions(parent=self, depends_on=[self.cert_manager, *first]),
        )
        self.datastore_name = DEFAULT_DATASTORE
        self.datastore = None
        if not args.shared_datastore:
            self.register_outputs({"kamaji": self.release.status})
            return
        # Tenants depend on this, so on destroy: tenants, then the DataStore (Kamaji running),
        # then the chart.
        self.datastore = DataStoreTeardown(
            f"{name}-datastore",
            datastore=DEFAULT_DATASTORE,
            kubeconfig=args.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.register_outputs({"kamaji": self.release.status})
