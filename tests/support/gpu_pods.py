"""A GPU pod as a team makes it with the plain API client (nothing of the stack's): one container
asking HAMi for a slice. The one builder every tier's GPU test pods come from."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from components.domain import hami_annotations as ha


def gpu_pod(
    name: str,
    mem: int,
    cores: int,
    *,
    image: str = "busybox",
    command: list[str] | None = None,
    scheduler: str | None = None,
) -> client.V1Pod:
    limits = {ha.RES_GPUMEM: str(mem), ha.RES_GPUCORES: str(cores)}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            scheduler_name=scheduler,
            containers=[
                client.V1Container(
                    name="c", image=image, command=command, resources=client.V1ResourceRequirements(limits=limits)
                )
            ],
        ),
    )


def create_gpu_pod(core: Any, namespace: str, name: str, mem: int, cores: int, **kwargs: Any) -> str:
    core.create_namespaced_pod(namespace, gpu_pod(name, mem, cores, **kwargs))
    return name
