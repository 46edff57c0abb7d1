"""Image references as container runtimes read them, and where each lives in the lab's mirror.

A mirror holds every upstream registry's images under one path prefix per registry
(`<mirror>/<registry>/<repository>`, e.g. `172.17.0.1:5000/registry.k8s.io/kube-apiserver`), so
two registries' repositories of the same name never meet, and a node asks the mirror for exactly
the upstream name its manifest gives (containerd's `override_path`, k3s's `rewrite`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Docker's normalisation (distribution/reference): no domain means Docker Hub, one-part names
# live under `library/`.
DOCKER_HUB = "docker.io"
LEGACY_DOCKER_HUB = "index.docker.io"
# The registries every node's runtime sends through the mirror, whatever the stack names: what
# charts and manifests pull from by default.
STANDARD_REGISTRIES = (DOCKER_HUB, "registry.k8s.io", "quay.io", "ghcr.io")


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference: registry, repository path, tag and digest (either may be empty)."""

    registry: str
    repository: str
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        """Split as Docker does: the first component is a registry when it has a `.` or a `:` or
        is `localhost`; a reference without a tag or digest has no tag here (runtimes say
        `latest`)."""
        rest, _, digest = ref.partition("@")
        first, sep, remainder = rest.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, remainder
        else:
            registry, path = DOCKER_HUB, rest
        if registry == LEGACY_DOCKER_HUB:
            registry = DOCKER_HUB
        slash = path.rfind("/")
        colon = path.rfind(":")
        tag = ""
        if colon > slash:
            path, tag = path[:colon], path[colon + 1 :]
        if registry == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        return cls(registry, path, tag, digest)

    @property
    def name(self) -> str:
        """The fully qualified reference (`docker.io/library/busybox:1.36`)."""
        return self.at(self.registry)

    def at(self, host: str, prefix: str = "") -> str:
        """The same image under another host (and path prefix): where it is pushed in a mirror."""
        path = f"{prefix}/{self.repository}" if prefix else self.repository
        ref = f"{host}/{path}"
        if self.tag:
            ref += f":{self.tag}"
        if self.digest:
            ref += f"@{self.digest}"
        return ref

    def in_mirror(self, mirror_host: str) -> str:
        """Where this image is kept in a mirror at `mirror_host` (`host[:port]`)."""
        return self.at(mirror_host, self.registry)


def registry_of(ref: str) -> str:
    return ImageRef.parse(ref).registry
