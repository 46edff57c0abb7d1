"""ControlPlane: one Kamaji TenantControlPlane, waited for, and a Provider on the stack's own identity.

The TCP's `super-admin.conf` only makes the stack's AutomationIdentity; everything else runs on
that identity's bound token. `admin.conf` (what people get) would not serve for the first step:
Kamaji binds its group only some time after the TCP reports Ready (kamaji#1167).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import TenantConfig
from components.config.versions import KONNECTIVITY_VERSION, coredns_addon
from components.domain.names import (
    admin_kubeconfig_secret,
    bootstrap_provider,
    tenant_namespace,
    tenant_provider,
)
from components.platform.component_options import waits_for
from components.providers.control_plane_settled import ControlPlaneSettled
from components.providers.tenant_version import TenantVersion
from components.tenant.automation_identity import AutomationIdentity

TCP_API_VERSION = "kamaji.clastix.io/v1alpha1"
TCP_KIND = "TenantControlPlane"
READY_TIMEOUT_SECONDS = 900
BOOTSTRAP_KUBECONFIG_KEY = "super-admin.conf"
USER_KUBECONFIG_KEY = "admin.conf"

# What kind's own kubelets run with inside kindest/node containers; Kamaji's generated
# KubeletConfiguration lacks these, so they are added (op add: the keys are absent).
KIND_KUBELET_PATCHES: tuple[dict[str, Any], ...] = (
    {"op": "add", "path": "/cgroupDriver", "value": "systemd"},
    {"op": "add", "path": "/cgroupRoot", "value": "/kubelet"},
    {"op": "add", "path": "/failSwapOn", "value": False},
    {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
    {
        "op": "add",
        "path": "/evictionHard",
        "value": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
    },
)


# Kamaji's default admission plugins (its CRD's default for `kubernetes.admissionControllers`)
# and NodeRestriction, which kube-apiserver does not enable by default: without it a kubelet may
# set any label on its own Node, the mock-GPU marker included (names.MOCK_GPU_NODE_LABEL).
ADMISSION_PLUGINS: tuple[str, ...] = (
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceLifecycle",
    "NodeRestriction",
    "PersistentVolumeClaimResize",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
)


TYPE = "gpu-tenancy:index:ControlPlane"
PREVIOUS_TYPE = "gpu-tenancy:index:Tenant"


def ready_at(version: str) -> list[str]:
    """What Pulumi waits for on create and on every update: Kamaji reports Ready *and* runs the
    tenant's version (it sets `version.version` to the spec's only once an upgrade is done), so
    an upgrade's workers start after the control plane has moved, not on the Ready left from
    before it."""
    return [
        "jsonpath={.status.kubernetesResources.version.status}=Ready",
        f"jsonpath={{.status.kubernetesResources.version.version}}={version}",
    ]


def control_plane_metadata(t: TenantConfig, namespace: pulumi.Input[str]) -> dict[str, Any]:
    """Its name and namespace, and the annotations that make Pulumi wait until Kamaji runs it."""
    return {
        "name": t.name,
        "namespace": namespace,
        "annotations": {
            "pulumi.com/waitFor": json.dumps(ready_at(t.kubernetes_version)),
            "pulumi.com/timeoutSeconds": str(READY_TIMEOUT_SECONDS),
        },
    }


def control_plane_spec(
    t: TenantConfig, address: str, datastore: pulumi.Input[str], schema: pulumi.Input[str]
) -> dict[str, Any]:
    """The TenantControlPlane spec: NodePort on the management address, addons named explicitly,
    CoreDNS and Konnectivity at the pinned versions."""
    return {
        "dataStore": datastore,
        "dataStoreSchema": schema,
        "dataStoreUsername": schema,
        "controlPlane": {
            "deployment": {"replicas": 1},
            "service": {"serviceType": "NodePort"},
        },
        "kubernetes": {
            "version": t.kubernetes_version,
            "admissionControllers": list(ADMISSION_PLUGINS),
            "kubelet": {
                "configurationJSONPatches": [dict(p) for p in KIND_KUBELET_PATCHES],
                "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
            },
        },
        "networkProfile": {
            "address": address,
            "port": t.api_port,
            "certSANs": ["127.0.0.1", "localhost", address],
            "podCidrs": [t.pod_cidr],
            "serviceCidrs": [t.service_cidr],
            "dnsServiceIPs": [t.dns_service_ip],
        },
        "addons": {
            # Pinned: the image the platform mirrors and builds, whichever kubeadm Kamaji embeds.
            "coreDNS": coredns_addon(),
            # No kubeProxy: Kamaji's takes no configuration (components/tenant/kube_proxy.py).
            # Pinned: Kamaji's own pick, v0.<tenant minor>.0, is not published for every minor
            # (v0.35.0 is not); the platform mirrors or builds this one (versions.KONNECTIVITY_IMAGES).
            "konnectivity": {
                "server": {"port": t.konnectivity_port, "version": KONNECTIVITY_VERSION},
                "agent": {"mode": "DaemonSet", "version": KONNECTIVITY_VERSION},
            },
        },
    }


@dataclass
class ControlPlaneArgs:
    tenant: TenantConfig
    # The management cluster address that workers and the host reach NodePorts on.
    address: str
    datastore: pulumi.Input[str]
    # Its etcd key prefix and user (StackConfig.datastore_schema): immutable once created.
    schema: pulumi.Input[str]
    # Lab: this stack makes the tenant's namespaces. Team: the platform made them (TeamAccess);
    # the team's identity may not create namespaces.
    owns_namespaces: bool = True


def _decode(data: dict[str, str], key: str) -> str:
    return base64.b64decode(data[key]).decode()


class ControlPlane(pulumi.ComponentResource):
    """A TenantControlPlane with Konnectivity, waited until Ready, and its kubeconfigs as secrets.
    Options: `provider` the management cluster's; `depends_on` what the TCP is created after, and
    deleted before (Kamaji's DataStore)."""

    endpoint: pulumi.Output[str]
    # admin.conf: what people get (stack output).
    kubeconfig: pulumi.Output[str]
    # The automation identity's token: what the program's own automation uses (providers and their back-ends).
    automation_kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: ControlPlaneArgs, opts: pulumi.ResourceOptions | None = None):
        after = waits_for(opts)
        # Stacks made before the rename hold it as Tenant: the alias keeps them (no replace).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=PREVIOUS_TYPE)]))
        super().__init__(TYPE, name, None, opts)
        t = args.tenant
        mgmt = pulumi.ResourceOptions(parent=self)
        self.namespace_name: pulumi.Output[str] = pulumi.Output.from_input(tenant_namespace(t.name))
        if args.owns_namespaces:
            ns = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": tenant_namespace(t.name)}, opts=mgmt)
            self.namespace_name = ns.metadata.name
        # Refuses at preview a version step Kamaji would refuse (down, a minor skipped, too new).
        self.version = TenantVersion(
            f"{name}-version",
            tenant=t.name,
            version=t.kubernetes_version,
            key=f"tenant {t.name}: kubernetesVersion",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.control_plane = k8s.apiextensions.CustomResource(
            f"{name}-tcp",
            api_version=TCP_API_VERSION,
            kind=TCP_KIND,
            metadata=control_plane_metadata(t, self.namespace_name),
            spec=control_plane_spec(t, args.address, args.datastore, args.schema),
            opts=pulumi.ResourceOptions.merge(mgmt, pulumi.ResourceOptions(depends_on=[*after, self.version])),
        )
        # The id is built from the TCP's id, which is known only once the TCP exists and is Ready
        # (and unknown while a new one is previewed), so the read never runs too early.
        secret_id = pulumi.Output.all(self.control_plane.id, self.namespace_name).apply(
            lambda a: f"{a[1]}/{admin_kubeconfig_secret(t.name)}"
        )
        secret = k8s.core.v1.Secret.get(f"{name}-admin-kubeconfig", secret_id, opts=mgmt)
        self.kubeconfig = pulumi.Output.secret(secret.data.apply(lambda d: _decode(d, USER_KUBECONFIG_KEY)))
        self_endpoint = f"https://{args.address}:{t.api_port}"
        self.endpoint = pulumi.Output.from_input(self_endpoint)
        read_super_admin = pulumi.Output.secret(secret.data.apply(lambda d: _decode(d, BOOTSTRAP_KUBECONFIG_KEY)))
        # Kamaji goes on rolling the control plane after it reports Ready: its first client waits.
        self.settled = ControlPlaneSettled(
            f"{name}-settled",
            tenant=t.name,
            control_plane=self.control_plane.id,
            version=t.kubernetes_version,
            kubeconfig=read_super_admin,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Known only once the gate is done, so everything on the tenant comes after it.
        super_admin = pulumi.Output.secret(pulumi.Output.all(self.settled.id, read_super_admin).apply(lambda a: a[1]))
        self.automation = AutomationIdentity(
            f"{name}-automation",
            super_admin=super_admin,
            endpoint=self_endpoint,
            bootstrap_provider_name=bootstrap_provider(t.name),
            provider_name=tenant_provider(t.name),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.automation_kubeconfig = self.automation.kubeconfig
        self.provider = self.automation.provider
        self.register_outputs({"endpoint": self.endpoint, "kubeconfig": self.kubeconfig})
