"""ManagementCluster: the cluster Kamaji runs in: a node container with `kubeadm init` (the
default: components.nodes.management_node says why), a k3s container, or an adopted kubeconfig."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.config import versions
from components.config.model import DISTRIBUTION_K3S, MODE_DOCKER, ClusterConfig, MirrorConfig
from components.kube.client import rewrite_server
from components.nodes import local_path
from components.nodes.management_node import API_PORT, INIT, INIT_CONFIG_PATH, init_configuration
from components.nodes.node_container import NodeContainer
from components.nodes.registry_mirror import CONTAINERD, K3S, mirror_files
from components.platform.lab_node import node_container

K3S_API_PORT = 6443

# Waits for k3s to write its kubeconfig and for its API to answer, then prints the kubeconfig.
READ_KUBECONFIG = """set -eu
i=0
until docker exec "$CONTAINER" kubectl get --raw /readyz >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -ge 150 ]; then echo "k3s in $CONTAINER was not ready after 300 s" >&2; exit 1; fi
  sleep 2
done
docker exec "$CONTAINER" cat /etc/rancher/k3s/k3s.yaml
"""


@dataclass
class ManagementClusterArgs:
    cluster: ClusterConfig
    # Given when the cluster is adopted (config mode "kubeconfig"); a secret.
    kubeconfig: pulumi.Input[str] | None = None
    # The management node's image (config `images.management`; distribution kubeadm).
    node_image: str = f"{versions.LAB_NODE_REPOSITORY}:{versions.MANAGEMENT_KUBERNETES_VERSION}"
    # The k3s image (config `images.k3s`; distribution k3s).
    k3s_image: str = versions.K3S_IMAGE
    # The registry mirror k3s pulls through (config `mirror`), for these registries.
    mirror: MirrorConfig | None = None
    mirror_registries: tuple[str, ...] = ()


class ManagementCluster(pulumi.ComponentResource):
    """Network + the management node (kubeadm, with its storage) or a k3s server container, and
    its kubeconfig as a secret; or an adopted kubeconfig.

    Either way the result is `provider`, a kubernetes Provider every platform resource uses, and
    `network_name`, the Docker network the tenants' worker containers join.
    """

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    network: docker.Network

    def __init__(self, name: str, args: ManagementClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:ManagementCluster", name, None, opts)
        c = args.cluster
        child = pulumi.ResourceOptions(parent=self)
        self.network = docker.Network(
            f"{name}-network",
            name=c.name,
            driver="bridge",
            ipam_configs=[docker.NetworkIpamConfigArgs(subnet=c.subnet)],
            opts=child,
        )
        self.ready: list[pulumi.Resource] = []
        if c.mode == MODE_DOCKER and c.distribution == DISTRIBUTION_K3S:
            self.kubeconfig = self._k3s(name, args, child)
        elif c.mode == MODE_DOCKER:
            self.kubeconfig = self._kubeadm(name, args, child)
        else:
            if args.kubeconfig is None:
                raise ValueError("an adopted management cluster needs its kubeconfig")
            self.kubeconfig = pulumi.Output.secret(args.kubeconfig)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self),
        )
        if c.mode == MODE_DOCKER and c.distribution != DISTRIBUTION_K3S:
            # What k3s brings itself: a default StorageClass for Kamaji's DataStore.
            self.storage = k8s.yaml.v2.ConfigGroup(
                f"{name}-storage",
                objs=local_path.manifests(),
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
            )
            self.ready.append(self.storage)
        self.register_outputs({"kubeconfig": self.kubeconfig, "network": self.network.name})

    def _kubeadm(self, name: str, args: ManagementClusterArgs, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        c = args.cluster
        node = f"{c.name}-management"
        files = {
            **mirror_files(args.mirror, args.mirror_registries, CONTAINERD),
            INIT_CONFIG_PATH: init_configuration(node, c.management_ip, versions.MANAGEMENT_KUBERNETES_VERSION, c.name),
        }
        spec = NodeContainer(name=node, image=args.node_image, files=tuple(sorted(files.items())))
        image = docker.RemoteImage(f"{name}-node-image", name=args.node_image, keep_locally=True, opts=child)
        container = node_container(
            f"{name}-node",
            spec,
            image.image_id,
            self.network.name,
            ipv4_address=c.management_ip,
            restart="unless-stopped",
            max_retry_count=None,
            # The name is fixed: the old container goes before its successor starts.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        # admin.conf names the controlPlaneEndpoint already; its server is said once more, as for k3s.
        server = f"https://{c.management_ip}:{API_PORT}"
        return self._kubeconfig(f"{name}-init", INIT, {"NODE": container.name}, container, server)

    def _k3s(self, name: str, args: ManagementClusterArgs, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        c = args.cluster
        image = docker.RemoteImage(f"{name}-k3s-image", name=args.k3s_image, keep_locally=True, opts=child)
        data = docker.Volume(f"{name}-k3s-data", name=f"{c.name}-k3s-data", opts=child)
        container = docker.Container(
            f"{name}-k3s",
            name=f"{c.name}-k3s",
            hostname=f"{c.name}-k3s",
            image=image.image_id,
            command=[
                "server",
                f"--tls-san={c.management_ip}",
                f"--node-ip={c.management_ip}",
                "--disable=traefik",
                "--disable=servicelb",
                # With a mirror, only the mirror: no pull falls back to the upstream registry.
                *(["--disable-default-registry-endpoint"] if args.mirror else []),
            ],
            privileged=True,
            tmpfs={"/run": "", "/var/run": ""},
            volumes=[docker.ContainerVolumeArgs(volume_name=data.name, container_path="/var/lib/rancher/k3s")],
            networks_advanced=[
                docker.ContainerNetworksAdvancedArgs(name=self.network.name, ipv4_address=c.management_ip)
            ],
            # k3s reads its registries.yaml at start; None without a mirror (the container it had).
            uploads=[
                docker.ContainerUploadArgs(file=path, content=content, permissions="0600")
                for path, content in sorted(mirror_files(args.mirror, args.mirror_registries, K3S).items())
            ]
            or None,
            restart="unless-stopped",
            must_run=True,
            opts=child,
        )
        server = f"https://{c.management_ip}:{K3S_API_PORT}"
        return self._kubeconfig(
            f"{name}-k3s-kubeconfig", READ_KUBECONFIG, {"CONTAINER": container.name}, container, server
        )

    def _kubeconfig(
        self,
        name: str,
        script: str,
        environment: dict[str, pulumi.Input[str]],
        container: docker.Container,
        server: str,
    ) -> pulumi.Output[str]:
        """The admin kubeconfig `script` prints once the container is up (run again only for a new
        container), with `server` (the address the host and workers reach it on); a secret."""
        read = command.local.Command(
            name,
            create=script,
            environment=environment,
            triggers=[container.id],
            logging=command.local.Logging.NONE,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["stdout"]),
        )
        return pulumi.Output.secret(read.stdout.apply(lambda text: rewrite_server(text, server)))
