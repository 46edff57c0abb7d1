"""TenantKubeProxy: kube-proxy in one tenant, made by the stack in place of Kamaji's addon.

Kamaji's kube-proxy addon takes an image and nothing else: its configuration is kubeadm's
default, which sizes the host-wide `nf_conntrack_max` (max(32768 x cores, 131072)) and exits
when it cannot write it. A worker that is a container (the lab's docker workers, kind's) may not
write it, so unless the host holds exactly that value the tenant's kube-proxy crash-loops ("open
/proc/sys/net/netfilter/nf_conntrack_max: permission denied"), Services do not route, and a pod
asking for the `kubernetes` Service's address sends it off the node to whatever answers there.
So the stack runs kubeadm's kube-proxy as kubeadm lays it out (a ServiceAccount bound to
`system:node-proxier`, a ConfigMap, a privileged host-network DaemonSet) with
`conntrack.maxPerCore: 0`, leaving conntrack's size to the host, as the management node's does.
Its names are the stack's own, apart from Kamaji's (which removes its own when the addon is off).
It follows the tenant's version (an upgrade rolls it after the control plane, as kubeadm does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config.versions import KUBE_PROXY_REPOSITORY

NAME = "gpu-tenancy-kube-proxy"
NAMESPACE = "kube-system"
CONFIG_DIR = "/var/lib/kube-proxy"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def proxy_configuration(pod_cidr: str) -> dict[str, Any]:
    """kube-proxy's configuration: iptables mode (the images carry no nft), conntrack left alone."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": f"{CONFIG_DIR}/kubeconfig.conf"},
        "clusterCIDR": pod_cidr,
        "mode": "iptables",
        "conntrack": {"maxPerCore": 0},
    }


def proxy_kubeconfig(server: str) -> dict[str, Any]:
    """The API server at the tenant's endpoint (not its Service, which kube-proxy itself routes),
    with the pod's ServiceAccount token and CA, as kubeadm writes it."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "default", "cluster": {"server": server, "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt"}}
        ],
        "contexts": [{"name": "default", "context": {"cluster": "default", "namespace": "default", "user": "default"}}],
        "current-context": "default",
        "users": [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}],
    }


def daemon_set_spec(version: str, config_map: str) -> dict[str, Any]:
    labels = {"k8s-app": NAME}
    return {
        "selector": {"matchLabels": labels},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "priorityClassName": "system-node-critical",
                "hostNetwork": True,
                "serviceAccountName": NAME,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "kube-proxy",
                        "image": f"{KUBE_PROXY_REPOSITORY}:{version}",
                        "command": [
                            "/usr/local/bin/kube-proxy",
                            f"--config={CONFIG_DIR}/config.conf",
                            "--hostname-override=$(NODE_NAME)",
                        ],
                        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        "securityContext": {"privileged": True},
                        "volumeMounts": [
                            {"name": "kube-proxy", "mountPath": CONFIG_DIR},
                            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                            {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "kube-proxy", "configMap": {"name": config_map}},
                    {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                    {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                ],
            },
        },
    }


@dataclass
class TenantKubeProxyArgs:
    kubernetes_version: str
    pod_cidr: str
    # The tenant API server as its workers reach it: https://<management address>:<NodePort>.
    server: str


class TenantKubeProxy(pulumi.ComponentResource):
    """kube-proxy on every node of one tenant, at its version, sizing no host setting (option
    `provider`: the tenant's)."""

    def __init__(self, name: str, args: TenantKubeProxyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:TenantKubeProxy", name, None, opts)
        on_tenant = pulumi.ResourceOptions(parent=self)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata={"name": NAME, "namespace": NAMESPACE}, opts=on_tenant
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata={"name": "gpu-tenancy:node-proxier"},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-proxier"},
            subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            opts=on_tenant,
        )
        config = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": NAME, "namespace": NAMESPACE},
            data={
                "config.conf": yaml.safe_dump(proxy_configuration(args.pod_cidr), sort_keys=False),
                "kubeconfig.conf": yaml.safe_dump(proxy_kubeconfig(args.server), sort_keys=False),
            },
            opts=on_tenant,
        )
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            # Its pods come with the nodes (a machine of an external pool joins whenever it does):
            # nothing waits here for them.
            metadata={"name": NAME, "namespace": NAMESPACE, "annotations": {"pulumi.com/skipAwait": "true"}},
            spec=daemon_set_spec(args.kubernetes_version, NAME),
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[account, binding, config])),
        )
        self.register_outputs({})
