"""The Docker side of the test loop: an engine that answers, this machine's kernel tunables kept,
and lab node containers on a network of their own, each removed by id when the test is done.

Where a prerequisite is missing the tier is skipped naming it, unless GPU_TENANCY_REQUIRE_DOCKER=1
(`.ci/run` sets it: CI provides every prerequisite of the tiers it claims, so a gap fails there).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from components.config.versions import LAB_BUSYBOX_IMAGE, LAB_NODE_REPOSITORY
from components.nodes.node_container import NodeContainer

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "GPU_TENANCY_REQUIRE_DOCKER"
# A node's cap: a joined worker with a few pods stays well under it (bench/node_image.py measures).
NODE_MEMORY_MIB = 1024
# The busybox every node image carries (Debian bookworm's busybox-static; tools/images/build.sh).
BUSYBOX = LAB_BUSYBOX_IMAGE
TUNABLES = ("kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory")


def missing(why: str) -> None:
    """Skip naming the missing part, or fail where CI promised the tier."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why} ({REQUIRE_ENV}=1: this run promised the Docker tier)")
    pytest.skip(why)


def docker(*args: str, check: bool = True, input: str | None = None, timeout: float = 300) -> str:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, input=input, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def ensure_engine() -> None:
    """A Docker engine that answers, started by tools/lab/docker.sh where none does."""
    try:
        proc = subprocess.run(["bash", str(ROOT / "tools/lab/docker.sh")], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        missing("no bash to run tools/lab/docker.sh")
        return
    if proc.returncode != 0:
        missing(f"no Docker engine: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'unknown'}")


def node_image(version: str) -> str:
    image = f"{LAB_NODE_REPOSITORY}:{version}"
    if not docker("image", "inspect", "--format", "{{.Id}}", image, check=False):
        missing(f"no node image {image} (build it: tools/images/build.sh node --kubernetes {version})")
    return image


def control_plane_image(component: str, version: str) -> str:
    """The lab's own registry.k8s.io/<component>:<version> (tools/images/build.sh control-plane)."""
    image = f"registry.k8s.io/{component}:{version}"
    if not docker("image", "inspect", "--format", "{{.Id}}", image, check=False):
        missing(
            f"no {image} (build it: tools/images/build.sh control-plane --kubernetes {version} --component {component})"
        )
    return image


def read_tunables(proc_sys: Path = Path("/proc/sys")) -> dict[str, str]:
    return {k: (proc_sys / k).read_text().strip() for k in TUNABLES}


class TunablesGuard:
    """tools/lab/tunables-guard.sh for the length of a test session; `restored` lists what it put back."""

    def __init__(self, proc_sys: Path | None = None, interval: float = 1.0):
        env = dict(os.environ, GUARD_INTERVAL=str(interval))
        if proc_sys is not None:
            env["PROC_SYS"] = str(proc_sys)
        self.proc = subprocess.Popen(
            ["bash", str(ROOT / "tools/lab/tunables-guard.sh")], stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self.kept = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self.kept.wait(10):
            raise RuntimeError("tools/lab/tunables-guard.sh did not start")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())
            if "keeping" in line:
                self.kept.set()

    @property
    def restored(self) -> list[str]:
        return [line for line in self.lines if "put back" in line]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._reader.join(5)


@dataclass
class DockerLab:
    """Node containers on a Docker network of their own; everything made is removed by id."""

    prefix: str = field(default_factory=lambda: f"gt-{uuid.uuid4().hex[:6]}")
    network: str = ""
    network_id: str = ""
    gateway: str = ""
    containers: dict[str, str] = field(default_factory=dict)  # name -> id

    def open(self) -> DockerLab:
        self.network = f"{self.prefix}-net"
        self.network_id = docker("network", "create", self.network)
        ipam = json.loads(docker("network", "inspect", "--format", "{{json .IPAM.Config}}", self.network_id))
        self.gateway = ipam[0].get("Gateway") or str(ipaddress.ip_network(ipam[0]["Subnet"])[1])
        return self

    def start_node(
        self,
        name: str,
        image: str,
        memory_mib: int = NODE_MEMORY_MIB,
        files: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> str:
        """A node container as WorkerNode makes it: created, its files (path -> content) written
        in, started."""
        full = f"{self.prefix}-{name}"
        pairs = files.items() if isinstance(files, Mapping) else files
        spec = NodeContainer(name=full, image=image, memory_mib=memory_mib, files=tuple(sorted(pairs)))
        self.containers[spec.name] = spec.start(self.network)
        return spec.name

    def exec(self, node: str, *cmd: str, check: bool = True, input: str | None = None, timeout: float = 120) -> str:
        return docker(
            "exec", *(["-i"] if input is not None else []), node, *cmd, check=check, input=input, timeout=timeout
        )

    def remove(self, node: str) -> None:
        cid = self.containers.pop(node)
        docker("rm", "--force", "--volumes", cid, check=False)

    def memory_mib(self, node: str) -> float:
        """The node's memory use now (docker stats), MiB."""
        usage = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", self.containers[node]).split("/")[0].strip()
        units = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / 1024 / 1024}
        for unit, factor in units.items():
            if usage.endswith(unit):
                return float(usage[: -len(unit)]) * factor
        raise ValueError(usage)

    def close(self) -> None:
        for cid in list(self.containers.values()):
            docker("rm", "--force", "--volumes", cid, check=False)
        self.containers.clear()
        if self.network_id:
            docker("network", "rm", self.network_id, check=False)


class MemorySampler:
    """Each node container's peak memory (docker stats), sampled until stopped."""

    def __init__(self, lab: DockerLab):
        self.lab, self.peak_mib = lab, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for node in list(self.lab.containers):
                try:
                    self.peak_mib[node] = max(self.peak_mib.get(node, 0.0), self.lab.memory_mib(node))
                except (AssertionError, ValueError, KeyError):
                    pass

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(5)
        return self.peak_mib
