"""ReleaseControllerImage: the controllers' container image (the release controller and KWOK's
token keeper), built on the lab host.

Built from components/controllers/release/Dockerfile with the project root as context
(.dockerignore lets in exactly the modules the two programs import), never pushed: the lab's
containers run it from the local Docker engine, so nothing is downloaded when a container
(re)starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker

from components.config import versions

IMAGE_NAME = "gpu-tenancy/release-controller:local"
DOCKERFILE = "components/controllers/release/Dockerfile"


TYPE = "gpu-tenancy:index:ReleaseControllerImage"
PREVIOUS_TYPE = "gpu-tenancy:index:ReleaserImage"


@dataclass
class ReleaseControllerImageArgs:
    base_image: str = versions.RELEASER_BASE_IMAGE
    # A PyPI mirror's simple index (config `images.pythonIndex`); None: pip's own.
    python_index: str | None = None
    # The PEM CA(s) pip trusts instead of the base image's bundle (config `images.pythonIndexCaCert`):
    # a mirror's private CA or a TLS-inspecting proxy's. A build argument: a CA is public.
    python_index_ca: str | None = None


def build_args(args: ReleaseControllerImageArgs) -> dict[str, str]:
    """The Dockerfile's build arguments; one left out is unset there (pip's own index and CAs)."""
    return (
        {"BASE_IMAGE": args.base_image}
        | ({"PIP_INDEX_URL": args.python_index} if args.python_index else {})
        | ({"PIP_CA_PEM": args.python_index_ca} if args.python_index_ca else {})
    )


class ReleaseControllerImage(pulumi.ComponentResource):
    """`ref` is the built image's id: a rebuild changes it, and the containers follow."""

    ref: pulumi.Output[str]

    def __init__(self, name: str, args: ReleaseControllerImageArgs, opts: pulumi.ResourceOptions | None = None):
        # Stacks made before the rename hold it as ReleaserImage: the alias keeps them (no replace).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=PREVIOUS_TYPE)]))
        super().__init__(TYPE, name, None, opts)
        self.image = docker.Image(
            f"{name}-image",
            image_name=IMAGE_NAME,
            build=docker.DockerBuildArgs(
                context=".",
                dockerfile=DOCKERFILE,
                args=build_args(args),
            ),
            skip_push=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.ref = self.image.repo_digest
        self.register_outputs({"ref": self.ref})
