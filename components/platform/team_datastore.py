"""TeamDataStore: one team's own etcd and the Kamaji DataStore naming it, on a platform.

On the lab every tenant keeps its state in Kamaji's one DataStore. On a platform that would let one
team reach every team: its users could fill the shared etcd until its space alarm turns every tenant
read-only, and a Kamaji bug or a misjudged field would be a cross-team leak. So each registered team
gets an etcd of its own, in a namespace of its own (`etcd-<team>`): kamaji-etcd's chart, the one the
Kamaji chart carries, at one replica, TLS from a CA of its own (cert-manager, through a self-signed
Issuer in that namespace; the client certificate Kamaji uses is renewed 15 days before it lapses),
a volume on the cluster's default StorageClass (deleted with the etcd), resource requests and
limits, and a size quota (`teams[].etcdQuotaMb`). The chart's post-install hook makes etcd's root
user and turns authentication on; its DataStore names the team (`etcd-<team>`), and the team's
control-plane policy holds the team to that one by equality.

Removing a team: its DataStoreTeardown comes first (it depends on the team's access and etcd), and
refuses while a TenantControlPlane still uses the DataStore, before anything of the team is touched;
then the team's namespace, and the etcd with its volume and namespace last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import versions
from components.config.chart_sources import ChartSource
from components.config.model import CHARTS, TeamSlot
from components.platform.component_options import waits_for
from components.platform.helm import Chart, HelmReleaseArgs, helm_release
from components.platform.kamaji import kamaji_etcd_image
from components.providers.datastore_teardown import DataStoreTeardown

ISSUER = "etcd-selfsigned"
# What one team's etcd may take from the management cluster. bench/team_etcd.py (etcd 3.6.16 with
# these flags): 32 MiB resident idle; with 256 MiB of 8 KiB objects written, a 337 MiB database,
# 236 MiB resident (0.61 MiB per MiB of database: its pages are memory-mapped) and 705 MiB of disk
# (the database, write-ahead log segments of 64 MiB each, at most 5 kept, and snapshots). So the
# memory limit grows with the quota, and the volume holds twice the quota.
ETCD_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
ETCD_CPU_LIMIT = "1"
ETCD_BASE_MEMORY_MI = 256


def etcd_memory_limit_mi(quota_mb: int) -> int:
    """Room for the whole database in memory beside etcd's own working set."""
    return ETCD_BASE_MEMORY_MI + quota_mb


def etcd_volume_gi(quota_mb: int) -> int:
    """Twice the quota (at least 1 GiB): the database at its quota, and beside it its write-ahead
    log (at most 5 segments of 64 MiB) and snapshots."""
    return max(1, math.ceil(2 * quota_mb / 1024))


def team_etcd_values(slot: TeamSlot) -> dict[str, Any]:
    """kamaji-etcd's values for one team's etcd (its images pinned as Kamaji's own subchart's)."""
    quota = slot.etcd_quota_mb
    return {
        "fullnameOverride": slot.datastore,
        "replicas": 1,
        "image": {**kamaji_etcd_image(versions.KAMAJI_ETCD_IMAGE, "repository"), "pullPolicy": "IfNotPresent"},
        "jobs": {
            "kubectl": kamaji_etcd_image(versions.KAMAJI_ETCD_KUBECTL_IMAGE),
            "etcd": {**kamaji_etcd_image(versions.KAMAJI_ETCD_CLIENT_IMAGE), "pullPolicy": "IfNotPresent"},
        },
        "quotaBackendBytes": str(quota * 1024 * 1024),
        "persistentVolumeClaim": {
            "size": f"{etcd_volume_gi(quota)}Gi",
            # the cluster's default StorageClass; the volume goes with the etcd
            "storageClassName": "",
            "retentionPolicyWhenDeleted": "Delete",
        },
        "resources": {
            "requests": ETCD_REQUESTS,
            "limits": {"cpu": ETCD_CPU_LIMIT, "memory": f"{etcd_memory_limit_mi(quota)}Mi"},
        },
        "selfSignedCertificates": {"enabled": False},
        "certManager": {
            "enabled": True,
            "issuerRef": {"name": ISSUER, "kind": "Issuer", "group": "cert-manager.io"},
        },
        "datastore": {"enabled": True, "name": slot.datastore},
    }


@dataclass
class TeamDataStoreArgs:
    team: TeamSlot
    # The management cluster's kubeconfig: the DataStore's teardown asks Kamaji with it.
    kubeconfig: pulumi.Input[str]
    # Where kamaji-etcd's chart comes from (config `charts.kamajiEtcd`); None: its repository.
    chart: ChartSource | None = None


class TeamDataStore(pulumi.ComponentResource):
    """The team's etcd namespace, its Issuer, the kamaji-etcd release (with its DataStore), and the
    DataStore's teardown. Options: `provider` the management cluster's; `depends_on` Kamaji (its
    DataStore CRD and webhooks) and cert-manager. `guard(after)` makes the teardown, which must
    come after everything else of the team (it is deleted first)."""

    name: str

    def __init__(self, name: str, args: TeamDataStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:TeamDataStore", name, None, opts)
        slot = args.team
        self.name = slot.datastore
        self._component, self._args, self._after = name, args, waits_for(opts)
        on = pulumi.ResourceOptions(parent=self, depends_on=self._after)
        self.namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": slot.datastore}, opts=on)
        issuer = k8s.apiextensions.CustomResource(
            f"{name}-issuer",
            api_version="cert-manager.io/v1",
            kind="Issuer",
            metadata={"name": ISSUER, "namespace": self.namespace.metadata.name},
            spec={"selfSigned": {}},
            opts=on,
        )
        self.release = helm_release(
            f"{name}-etcd",
            # released as `etcd-<team>` in the namespace of that name
            HelmReleaseArgs(
                Chart(slot.datastore, *CHARTS["kamajiEtcd"]), slot.datastore, team_etcd_values(slot), args.chart
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[issuer, *self._after]),
        )
        self.register_outputs({"datastore": self.name, "etcd": self.release.status})

    def guard(self, after: list[pulumi.Resource]) -> DataStoreTeardown:
        """The DataStore's teardown, after the etcd and `after` (the team's access): on removal it
        goes first, and refuses while a control plane still uses the DataStore."""
        return DataStoreTeardown(
            f"{self._component}-datastore",
            datastore=self.name,
            kubeconfig=self._args.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release, *after, *self._after]),
        )
