"""KwokController: KWOK for one tenant's kwok pools, in a container on the lab's Docker network.

KWOK needs only the tenant API server. It acts as a ServiceAccount limited to what KWOK does
(KWOK_RBAC_RULES), on a bound, expiring token: a keeper container beside it (the release
controller's image, components.kube.bound_token) renews the token with the token itself and keeps
it in a Docker volume both share; KWOK's kubeconfig names that file (`tokenFile`, which client-go
re-reads every minute), so a renewal restarts nothing. Kubeconfigs reach the containers only as
uploaded files, from Pulumi secrets. Both are restarted by Docker and removed on destroy.
KWOK's own server (health, metrics) listens on the container's loopback only (`kwok_command`):
the lab's network reaches every tenant's workers, and nothing outside the container calls it.
Logs: `docker logs <lab>-<tenant>-kwok` (and `...-kwok-token-keeper`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker

from components.config import versions
from components.controllers.kwok import KWOK_PORT, KWOK_RBAC_RULES, NODE_STAGES, kwok_args
from components.domain.names import TENANT_LABEL, kwok_name, tokens_volume
from components.kube.client import cluster_ca, token_file_kubeconfig
from components.tenant.release_controller import KUBECONFIG_PATH, RUN_AS, TOKEN_DIR
from components.tenant.service_account import scoped_kubeconfig

SERVICE_ACCOUNT = "gpu-tenancy-kwok"
TOKEN_FILE = f"{TOKEN_DIR}/token"
MOUNT = "/etc/gpu-tenancy"
# Memory caps (swap: none beyond them), so one tenant's KWOK or keeper cannot take the host's memory
# from the others. bench/controller_memory.py: KWOK 56 MiB resident with no node, 113 MiB with
# 2,000 Ready nodes (about 0.03 MiB a node: 5,000 nodes, a pool's most, near 200 MiB); the keeper
# 17 MiB idle, 66 MiB at a renewal.
MEMORY_MIB = 512
KEEPER_MEMORY_MIB = 192
KEEPER_HEALTH = f"import os,sys; sys.exit(not os.path.getsize({TOKEN_FILE!r}))"
SERVER_ADDRESS = "--server-address="


def kwok_command(kubeconfig_path: str, pod_cidr: str, stages_path: str) -> list[str]:
    """kwok_args with KWOK's server on loopback (its own default is every address): no pod, node
    or tenant reaches it, and no exec, logs or port-forward is configured for it to serve."""
    args = [a for a in kwok_args(kubeconfig_path, pod_cidr, stages_path) if not a.startswith(SERVER_ADDRESS)]
    return [*args, f"{SERVER_ADDRESS}127.0.0.1:{KWOK_PORT}"]


@dataclass
class KwokControllerArgs:
    tenant: str
    lab_name: str
    network: pulumi.Input[str]
    # The keeper's image: the release controller's (ReleaseControllerImage.ref).
    keeper_image: pulumi.Input[str]
    # The tenant API server as the lab's Docker network reaches it.
    server: str
    pod_cidr: str
    # Used once, to issue the ServiceAccount's token; the containers never see it.
    admin_kubeconfig: pulumi.Input[str]
    # KWOK's own image (config `images.kwok`).
    image: str = versions.KWOK_IMAGE


class KwokController(pulumi.ComponentResource):
    """KWOK's identity in the tenant (option `provider`: the tenant's), its token keeper and KWOK
    itself on the lab's host."""

    container: docker.Container
    keeper: docker.Container

    def __init__(self, name: str, args: KwokControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:KwokController", name, None, opts)
        kubeconfig = scoped_kubeconfig(
            name,
            account=SERVICE_ACCOUNT,
            rules=KWOK_RBAC_RULES,
            server=args.server,
            admin_kubeconfig=args.admin_kubeconfig,
            parent=self,
        )
        child = pulumi.ResourceOptions(parent=self)
        container_name = kwok_name(args.lab_name, args.tenant)
        labels = [docker.ContainerLabelArgs(label=TENANT_LABEL, value=args.tenant)]
        self.tokens = docker.Volume(
            f"{name}-tokens",
            name=tokens_volume(container_name),
            labels=[docker.VolumeLabelArgs(label=TENANT_LABEL, value=args.tenant)],
            opts=child,
        )
        mounts = [docker.ContainerVolumeArgs(volume_name=self.tokens.name, container_path=TOKEN_DIR)]
        self.keeper = docker.Container(
            f"{name}-token-keeper",
            name=f"{container_name}-token-keeper",
            image=args.keeper_image,
            entrypoints=["python", "-m", "components.kube.bound_token"],
            command=["--kubeconfig", KUBECONFIG_PATH, "--token-file", TOKEN_FILE],
            user=RUN_AS,  # a bare uid: the owned upload below (release_controller.RUN_AS says why)
            restart="unless-stopped",
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            uploads=[
                docker.ContainerUploadArgs(
                    file=KUBECONFIG_PATH, content=kubeconfig, owner=RUN_AS, group=RUN_AS, permissions="0400"
                )
            ],
            volumes=mounts,
            labels=labels,
            memory=KEEPER_MEMORY_MIB,
            memory_swap=KEEPER_MEMORY_MIB,
            # Healthy once the token file is written: KWOK starts after that.
            healthcheck=docker.ContainerHealthcheckArgs(
                tests=["CMD", "python", "-c", KEEPER_HEALTH], interval="5s", timeout="3s", retries=3
            ),
            must_run=True,
            wait=True,
            wait_timeout=60,
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        image = docker.RemoteImage(f"{name}-image", name=args.image, keep_locally=True, opts=child)
        kwok_kubeconfig = pulumi.Output.from_input(args.admin_kubeconfig).apply(
            lambda admin: token_file_kubeconfig(args.server, cluster_ca(admin), TOKEN_FILE)
        )
        self.container = docker.Container(
            f"{name}-container",
            name=container_name,
            image=image.image_id,
            command=kwok_command(f"{MOUNT}/kubeconfig", args.pod_cidr, f"{MOUNT}/stages.yaml"),
            user=f"{RUN_AS}:{RUN_AS}",
            restart="unless-stopped",
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            uploads=[
                docker.ContainerUploadArgs(file=f"{MOUNT}/kubeconfig", content=kwok_kubeconfig, permissions="0444"),
                docker.ContainerUploadArgs(file=f"{MOUNT}/stages.yaml", content=NODE_STAGES, permissions="0444"),
            ],
            volumes=mounts,
            labels=labels,
            memory=MEMORY_MIB,
            memory_swap=MEMORY_MIB,
            must_run=True,
            # One KWOK per tenant: two would fight over the same nodes, so the old one goes first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=[self.keeper]),
        )
        self.register_outputs({"container": self.container.name, "keeper": self.keeper.name})
