"""The management node started as the stack starts it (components.nodes.management_node): the
Docker tier and bench/management_node.py share this."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import yaml

from components.config.image_refs import STANDARD_REGISTRIES
from components.config.versions import LOCAL_PATH_PROVISIONER_IMAGE, MANAGEMENT_KUBERNETES_VERSION, kubeadm_images
from components.kube.client import api_client
from components.nodes import local_path
from components.nodes.management_node import ADMIN_KUBECONFIG, API_PORT, INIT, INIT_CONFIG_PATH, init_configuration
from components.nodes.registry_mirror import Mirror, containerd_files
from tests.support.docker_lab import DockerLab, docker
from tests.support.waits import settles

# The management node's cap in the lab's tests: its control plane, CoreDNS and the provisioner
# use about 0.7 GiB (bench/management_node.py measures).
MANAGEMENT_MEMORY_MIB = 3072


def pulled_images() -> list[str]:
    """What the node pulls through the mirror: kubeadm's images but pause (the node carries it),
    and the storage provisioner."""
    wanted = [i for i in kubeadm_images(MANAGEMENT_KUBERNETES_VERSION) if "/pause:" not in i]
    return [*wanted, LOCAL_PATH_PROVISIONER_IMAGE]


@dataclass
class Management:
    node: str
    address: str
    kubeconfig: str
    init_seconds: float
    ready_seconds: float

    def client(self) -> Any:
        return api_client(self.kubeconfig)

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.client())


def node_ready(core: Any, name: str) -> bool:
    node = core.read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


# kubeadm's taint on a control-plane node, which the project's InitConfiguration leaves off.
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"


def untainted(core: Any, name: str, timeout: float = 60) -> list[Any]:
    """The node's taints once it has none (the node lifecycle controller lifts its `not-ready`
    taint some seconds after the kubelet reports Ready), or what is left at the deadline; the
    control-plane taint is never waited for: it must not be there at all."""
    taints = core.read_node(name).spec.taints or []
    assert not [t for t in taints if t.key == CONTROL_PLANE_TAINT], taints
    settles(lambda: not core.read_node(name).spec.taints, timeout=timeout, interval=1)
    return core.read_node(name).spec.taints or []


def start_management(
    lab: DockerLab, image: str, mirror_endpoint: str, memory_mib: int = MANAGEMENT_MEMORY_MIB
) -> Management:
    """The node container with the mirror's files, the project's init configuration and INIT;
    returns once the Node is Ready (AssertionError naming what failed otherwise)."""
    start = time.monotonic()
    name = lab.start_node(
        "management",
        image,
        memory_mib=memory_mib,
        files=containerd_files(Mirror(mirror_endpoint), STANDARD_REGISTRIES),
    )
    address = docker(
        "inspect", "--format", f'{{{{(index .NetworkSettings.Networks "{lab.network}").IPAddress}}}}', name
    )
    # The stack writes it before the container starts (an upload); here the address is Docker's
    # choice, known once the container runs, and nothing reads the file before INIT.
    config = init_configuration(name, address, MANAGEMENT_KUBERNETES_VERSION, lab.prefix)
    lab.exec(name, "sh", "-c", f"mkdir -p $(dirname {INIT_CONFIG_PATH}) && cat > {INIT_CONFIG_PATH}", input=config)
    proc = subprocess.run(
        ["/bin/sh", "-c", INIT], capture_output=True, text=True, timeout=900, env={**os.environ, "NODE": name}
    )
    init_seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    kubeconfig = proc.stdout
    server = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"]
    assert server == f"https://{address}:{API_PORT}", server
    m = Management(name, address, kubeconfig, init_seconds, 0.0)
    core = m.core()
    assert settles(lambda: node_ready(core, name), timeout=180, interval=1), core.read_node(name).status.conditions
    m.ready_seconds = time.monotonic() - start
    return m


def apply_storage(m: Management) -> None:
    """The local-path objects the stack applies (ManagementCluster's ConfigGroup), with the node's
    kubectl and the admin kubeconfig."""
    subprocess.run(
        ["docker", "exec", "-i", m.node, "kubectl", "--kubeconfig", ADMIN_KUBECONFIG, "apply", "-f", "-"],
        input="\n---\n".join(json.dumps(o) for o in local_path.manifests()),
        text=True,
        check=True,
        capture_output=True,
        timeout=120,
    )
