"""The management cluster's node: one container from the lab's node image, `kubeadm init` with the
project's own configuration. The stack (ManagementCluster) and the Docker tier both start it from
here, so what is tested is what the stack starts.

Why kubeadm on the lab's node image rather than k3s: the workers already run that image, so the
lab needs one Kubernetes distribution, every image of it is built from the package registries
(tools/images/build.sh all), and a closed network mirrors one set. Kamaji's own getting-started
runs on kind, which is the same shape (kubeadm in a node container).

What the node fits to its host is the image's job (gpu-tenancy-node-setup: runc, the kubelet's
cgroup driver, `failCgroupV1: false` on cgroup v1); what the cluster is, this module's:
- the only node, so it keeps no control-plane taint: Kamaji, its DataStore and every tenant's
  control plane run on it;
- the API server and every NodePort on `address` (the `managementIp` the workers reach);
- pod and service ranges that the node's pod network (gpu-tenancy-network) serves from the Node's
  pod CIDR, which kube-controller-manager allocates from `podSubnet`;
- kube-proxy told not to size conntrack, a host-wide setting a container may not write;
- no bootstrap token: nothing joins this cluster, so none is left valid.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.config.versions import KUBEADM_IMAGE_TAGS

API_PORT = 6443
POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/16"
DNS_DOMAIN = "cluster.local"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
# Written into the container before it starts (a change of it is a new node: the Docker provider
# replaces a container whose uploads change), read by INIT.
INIT_CONFIG_PATH = "/etc/gpu-tenancy/kubeadm-init.yaml"
ADMIN_KUBECONFIG = "/etc/kubernetes/admin.conf"
# kubeadm's own wait for the control plane's static pods (v1beta4 `timeouts.controlPlaneComponentHealthCheck`):
# every image comes through the mirror first, about 0.7 GB.
CONTROL_PLANE_WAIT_SECONDS = 600
CONTAINERD_WAIT_SECONDS = 120


def init_documents(node: str, address: str, version: str, cluster_name: str) -> list[dict[str, Any]]:
    """kubeadm's InitConfiguration, ClusterConfiguration and KubeProxyConfiguration for the node."""
    if version not in KUBEADM_IMAGE_TAGS:
        raise ValueError(f"no kubeadm image table for Kubernetes {version} (pinned: {', '.join(KUBEADM_IMAGE_TAGS)})")
    endpoint = f"{address}:{API_PORT}"
    return [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "localAPIEndpoint": {"advertiseAddress": address, "bindPort": API_PORT},
            "nodeRegistration": {
                "name": node,
                "criSocket": CRI_SOCKET,
                "taints": [],
                "imagePullPolicy": "IfNotPresent",
                "kubeletExtraArgs": [{"name": "node-ip", "value": address}],
            },
            # Nothing joins it: no bootstrap token, and so no join command to print.
            "skipPhases": ["bootstrap-token", "show-join-command"],
            "timeouts": {"controlPlaneComponentHealthCheck": f"{CONTROL_PLANE_WAIT_SECONDS}s"},
        },
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            "clusterName": cluster_name,
            "kubernetesVersion": version,
            "controlPlaneEndpoint": endpoint,
            "networking": {"podSubnet": POD_SUBNET, "serviceSubnet": SERVICE_SUBNET, "dnsDomain": DNS_DOMAIN},
            "apiServer": {
                "certSANs": [address, node, "localhost", "127.0.0.1"],
                # Node names resolve through the host's DNS, not the lab's: logs and exec by address.
                "extraArgs": [{"name": "kubelet-preferred-address-types", "value": "InternalIP,Hostname"}],
            },
        },
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "conntrack": {"maxPerCore": 0},
        },
    ]


def init_configuration(node: str, address: str, version: str, cluster_name: str) -> str:
    return yaml.safe_dump_all(init_documents(node, address, version, cluster_name), sort_keys=False)


# Waits for the node's containerd and the images it carries (pause: kubeadm's preflight would
# pull it otherwise), runs `kubeadm init` once (a node that has its admin kubeconfig
# was initialised: a restarted container keeps its cluster), waits for the API server to answer
# through the node's address, then prints the admin kubeconfig. Only on a cgroup v1 host is
# kubeadm's SystemVerification (which refuses cgroup v1 from 1.35) skipped; the image's setup has
# told the kubelet `failCgroupV1: false` there. A failed init prints kubeadm's output and the
# node's kubelet log tail, then one line in the project's words.
INIT = f"""set -eu
i=0
until docker exec "$NODE" systemctl is-active --quiet containerd &&
    docker exec "$NODE" systemctl is-active --quiet gpu-tenancy-images; do
  i=$((i + 1))
  if [ "$i" -ge {CONTAINERD_WAIT_SECONDS // 2} ]; then
    echo "error: containerd in $NODE did not start within {CONTAINERD_WAIT_SECONDS} s" >&2; exit 1
  fi
  sleep 2
done
if ! docker exec "$NODE" test -s {ADMIN_KUBECONFIG}; then
  if ! out=$(docker exec "$NODE" sh -c 'ignore=""
      [ -f /sys/fs/cgroup/cgroup.controllers ] || ignore=--ignore-preflight-errors=SystemVerification
      kubeadm init --config {INIT_CONFIG_PATH} --skip-token-print $ignore 2>&1' 2>&1); then
    printf '%s\\n' "$out" >&2
    docker exec "$NODE" sh -c 'journalctl -u kubelet --no-pager -n 30' >&2 2>/dev/null || true
    case "$out" in
      *"ImagePull"*)
        why="an image kubeadm needs could not be pulled: is it in the mirror (tools/images/build.sh all --push)?" ;;
      *) why="kubeadm init failed: $(printf '%s\\n' "$out" | grep '^error' | tail -n 1)" ;;
    esac
    echo "error: the management node $NODE did not start its cluster: $why" >&2
    exit 1
  fi
fi
i=0
until docker exec "$NODE" kubectl --kubeconfig {ADMIN_KUBECONFIG} get --raw /readyz >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -ge 150 ]; then
    echo "error: the management cluster's API in $NODE was not ready after 300 s" >&2; exit 1
  fi
  sleep 2
done
docker exec "$NODE" cat {ADMIN_KUBECONFIG}
"""
