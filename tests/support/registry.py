"""The lab's registry in the Docker tier: tools/lab/registry.sh on the Docker bridge's gateway, a
port of its own and its cache in the test's temporary directory (a registry of the user's is left
alone), filled by tools/lab/mirror-push.sh. Nodes on a lab network reach it through the host."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from components.config.image_refs import ImageRef
from components.nodes.registry_mirror import Mirror
from tests.support.docker_lab import ROOT, docker, missing

REGISTRY_SH = ROOT / "tools/lab/registry.sh"
MIRROR_PUSH = ROOT / "tools/lab/mirror-push.sh"


@dataclass
class Registry:
    endpoint: str
    env: dict[str, str]
    log: Path
    ca: Path | None = None  # the CA (PEM) that signed an HTTPS registry's certificate

    @property
    def host(self) -> str:
        return Mirror(self.endpoint).host

    def script(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(REGISTRY_SH), *args], env=self.env, capture_output=True, text=True, timeout=120
        )


def free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def bridge_gateway() -> str:
    """The default bridge's address on the host. A fresh engine may list only the subnet (no
    Gateway in its IPAM config): Docker gives the bridge the subnet's first address then."""
    found = docker("network", "inspect", "bridge", "--format", "{{json (index .IPAM.Config 0)}}")
    config = json.loads(found)
    return config.get("Gateway") or str(ipaddress.ip_network(config["Subnet"])[1])


@contextmanager
def lab_registry(cache: Path, address: str, *options: str) -> Iterator[Registry]:
    """tools/lab/registry.sh start on `address`, a free port, its cache in `cache` (with --tls it
    says https://, else http://); stopped after."""
    for tool, package in (("docker-registry", "docker-registry"), ("skopeo", "skopeo")):
        if shutil.which(tool) is None:
            missing(f"no {tool} (apt-get install {package})")
    env = {**os.environ, "GPU_TENANCY_CACHE": str(cache)}
    reg = Registry(endpoint="", env=env, log=cache / "registry/registry.log")
    listen = f"{address}:{free_port(address)}"
    started = reg.script("start", "--listen", listen, *options)
    assert started.returncode == 0, started.stderr
    reg.endpoint = started.stdout.strip()
    assert reg.endpoint == f"{'https' if '--tls' in options else 'http'}://{listen}", started
    try:
        yield reg
    finally:
        stopped = reg.script("stop")
        assert stopped.returncode == 0, stopped.stderr


def push(registry: Registry, *images: str) -> float:
    """mirror-push.sh of local images into the registry under their upstream names; its seconds."""
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(MIRROR_PUSH), registry.host, *images], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    for image in images:
        assert f"{image} -> {ImageRef.parse(image).in_mirror(registry.host)}" in proc.stderr, proc.stderr
    return time.monotonic() - start


def requests(registry: Registry, path: str) -> list[str]:
    """The registry's access lines for `path` from a containerd (HEAD or GET first)."""
    lines = [line for line in registry.log.read_text().splitlines() if path in line and "containerd" in line]
    return [line for line in lines if '"HEAD ' in line or '"GET ' in line] or lines
