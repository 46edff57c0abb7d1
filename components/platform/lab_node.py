"""A lab node container as the Docker provider makes it, from NodeContainer: the one translation
the management node and every tenant's workers share, so both run as the Docker tier starts them."""

from __future__ import annotations

import pulumi
import pulumi_docker as docker

from components.nodes.node_container import MODULES_PATH, VAR_PATH, NodeContainer


def node_container(
    name: str,
    spec: NodeContainer,
    image_id: pulumi.Input[str],
    network: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    ipv4_address: str | None = None,
    restart: str = "on-failure",
    max_retry_count: int | None = 1,
) -> docker.Container:
    """The container of `spec`, its /var an anonymous volume removed with it."""
    return docker.Container(
        name,
        name=spec.name,
        hostname=spec.name,
        image=image_id,
        privileged=spec.privileged,
        security_opts=list(spec.security_opts),
        tmpfs=dict.fromkeys(spec.tmpfs, ""),
        cgroupns_mode=spec.cgroupns_mode,
        envs=list(spec.envs),
        stop_signal=spec.stop_signal,
        volumes=[
            docker.ContainerVolumeArgs(container_path=VAR_PATH),
            docker.ContainerVolumeArgs(host_path=MODULES_PATH, container_path=MODULES_PATH, read_only=True),
        ],
        memory=spec.memory_mib,
        memory_swap=spec.memory_mib,
        networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=network, ipv4_address=ipv4_address)],
        # None without files: a lab without a mirror keeps the container it had.
        uploads=[
            docker.ContainerUploadArgs(file=path, content=content, permissions="0644") for path, content in spec.files
        ]
        or None,
        restart=restart,
        max_retry_count=max_retry_count,
        must_run=True,
        remove_volumes=True,
        opts=opts,
    )
