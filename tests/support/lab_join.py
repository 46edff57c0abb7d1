"""A real control plane for lab node containers to join, and the project's own join run against
it: the Docker tier's tests and bench/node_image.py share it.

The control plane is the tools cache's kube-apiserver and kube-controller-manager on the lab
network's gateway address, given what Kamaji gives a tenant before any node joins: kubeadm's own
`init phase upload-config` and `bootstrap-token` (cluster-info, kubeadm-config, kubelet-config,
the bootstrap RBAC; run from the node image, the same kubeadm Kamaji embeds the phases of),
NodeBootstrap's RBAC, the tenant's kubelet patches (ControlPlane's KIND_KUBELET_PATCHES), and
CSR signing, approval, node CIDRs and the token controllers in kube-controller-manager.

The join is WorkerNode's: its JOIN script with the JoinConfiguration on stdin, a token from the
BootstrapToken provider, the Node awaited and the token revoked by the NodeMembership provider.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import yaml

from components.lifecycle.bootstrap_token import (
    NODE_BOOTSTRAP_BINDINGS,
    NODE_NETWORK_ROLE,
    NODE_NETWORK_RULES,
    join_configuration,
    kubeconfig_ca_hash,
    token_id,
    worker_joins,
)
from components.providers.bootstrap_token import BootstrapTokenProvider
from components.providers.node_membership import NodeMembershipProvider
from components.tenant.control_plane import KIND_KUBELET_PATCHES
from components.tenant.worker_node import JOIN
from tests.support.cluster import TestCluster, start_cluster
from tests.support.docker_lab import DockerLab, docker

POD_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
# Status reports every few seconds (the kubelet's default is 5 minutes without a change), so a
# test sees several status updates of a Node in under a minute.
STATUS_REPORT_SECONDS = 4


def kubelet_configuration() -> dict[str, Any]:
    """What a tenant's kubelets get: kubeadm's defaults plus the tenant's kubelet patches."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "nodeStatusUpdateFrequency": f"{STATUS_REPORT_SECONDS}s",
        "nodeStatusReportFrequency": f"{STATUS_REPORT_SECONDS}s",
    }
    for patch in KIND_KUBELET_PATCHES:
        assert patch["op"] == "add"
        config[patch["path"].lstrip("/")] = patch["value"]
    return config


def start_control_plane(tools: dict[str, str], lab: DockerLab, image: str) -> TestCluster:
    cluster = start_cluster(
        tools,
        address=lab.gateway,
        api_args=[
            "--authorization-mode=Node,RBAC",
            "--enable-bootstrap-token-auth=true",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ],
    )
    try:
        kamaji_gives(cluster, tools, lab, image)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def kamaji_gives(cluster: TestCluster, tools: dict[str, str], lab: DockerLab, image: str) -> None:
    """kube-controller-manager's node controllers, kubeadm's phases and NodeBootstrap's RBAC."""
    w = cluster.workdir
    cluster.start_controller_manager(
        [
            "csrapproving",
            "csrsigning",
            "csrcleaner",
            "bootstrapsigner",
            "tokencleaner",
            "nodeipam",
            "nodelifecycle",
        ],
        [
            f"--cluster-signing-cert-file={w / 'ca.crt'}",
            f"--cluster-signing-key-file={w / 'ca.key'}",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={POD_CIDR}",
            "--node-cidr-mask-size=24",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ],
    )
    version = subprocess.run(
        ["kube-apiserver", "--version"], capture_output=True, text=True, env=tools, check=True
    ).stdout.split()[-1]
    docs = [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "nodeRegistration": {"name": "control-plane", "criSocket": "unix:///run/containerd/containerd.sock"},
            "localAPIEndpoint": {"advertiseAddress": lab.gateway, "bindPort": cluster.port},
        },
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            "kubernetesVersion": version,
            "controlPlaneEndpoint": cluster.endpoint,
            "networking": {"podSubnet": POD_CIDR, "serviceSubnet": SERVICE_CIDR},
        },
        kubelet_configuration(),
    ]
    (w / "kubeadm.yaml").write_text(yaml.safe_dump_all(docs))
    os.chmod(w, 0o755)
    for phase in (["upload-config", "kubeadm"], ["upload-config", "kubelet"], ["bootstrap-token"]):
        docker(
            "run", "--rm", "--network", lab.network, "--volume", f"{w}:/cfg:ro", "--entrypoint", "kubeadm", image,
            "init", "phase", *phase, "--config", "/cfg/kubeadm.yaml", "--kubeconfig", "/cfg/kubeconfig",
        )  # fmt: skip
    node_bootstrap_rbac(cluster)


def node_bootstrap_rbac(cluster: TestCluster) -> None:
    """What NodeBootstrap makes in a tenant, from the same table."""
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    rbac.create_cluster_role({"metadata": {"name": NODE_NETWORK_ROLE}, "rules": [dict(r) for r in NODE_NETWORK_RULES]})
    for suffix, (role, group) in NODE_BOOTSTRAP_BINDINGS.items():
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": f"gpu-tenancy:{suffix}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
            }
        )


@dataclass
class Joined:
    node: str
    machine_id: str
    join_seconds: float
    membership: dict[str, Any]


def run_join(node: str, config: str) -> subprocess.CompletedProcess:
    """WorkerNode's JOIN, as the command provider runs it: `sh -c`, the node in NODE, config on stdin."""
    return subprocess.run(
        ["/bin/sh", "-c", JOIN],
        input=config,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NODE": node},
    )


def join_worker(cluster: TestCluster, lab: DockerLab, node: str, ttl_seconds: int = 900) -> Joined:
    """The project's join of one node container: token, JOIN, NodeMembership (Node awaited, token revoked)."""
    kubeconfig = cluster.kubeconfig_text
    cid = lab.containers[node]
    token = BootstrapTokenProvider().create(
        {
            "kubeconfig": kubeconfig,
            "token_id": token_id(f"{node}/{cid}"),
            "ttl_seconds": ttl_seconds,
            "description": f"gpu-tenancy: join of {node}",
            "joins": worker_joins(node),
        }
    )
    config = join_configuration(cluster.endpoint, token.outs["token"], kubeconfig_ca_hash(kubeconfig), node)
    start = time.monotonic()
    proc = run_join(node, config)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise AssertionError(f"join of {node} failed:\n{proc.stderr[-3000:]}")
    machine = proc.stdout.strip().splitlines()[-1]
    membership = {
        "kubeconfig": kubeconfig,
        "node": node,
        "machine_id": machine,
        "token_id": token.outs["token_id"],
        "timeout_seconds": 180,
    }
    NodeMembershipProvider().create(membership)
    return Joined(node=node, machine_id=machine, join_seconds=seconds, membership=membership)


def node_ready(core: Any, name: str) -> bool:
    node = core.read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
