"""The dev stack run whole on this host, as the README runs it: a copy of the project whose
Pulumi.dev.yaml is set for the lab (the lab's node image, the lab's Python base, a local registry
on the Docker bridge as the mirror, the charts from directories, the lab's busybox for the
workloads), `bash scripts/up-dev.sh` in it, and what a run costs (its seconds; the lab's
containers' and the engine's memory and CPU, sampled). Used by the lab tier
(tests/lab/test_dev_stack_lab.py) and its benchmark (bench/dev_lab.py).

Needs, each named by `missing` when absent: the docker and command provider plugins
(tests/support/plugins.py), the images the stack names in the engine (tools/images/build.sh all,
and those only fetched sources give: Kamaji, cert-manager, HAMi's scheduler, its mock device
plugin), their charts as directories in GPU_TENANCY_LAB_CHARTS (kamaji/ with charts/kamaji-etcd,
cert-manager/, hami/), Debian's docker-registry and skopeo. Where pip's downloads pass a
TLS-inspecting proxy, GPU_TENANCY_PIP_CA names a PEM file with that proxy's CA (the CA itself,
not a system bundle: the stack's config reaches the program in one environment variable, which
the kernel limits to 128 KiB).
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config.image_refs import ImageRef
from components.config.versions import LAB_BUSYBOX_IMAGE, LAB_NODE_REPOSITORY, LAB_PYTHON_IMAGE
from components.domain.names import TENANT_LABEL
from tests.support.docker_lab import ROOT, TunablesGuard, docker, ensure_engine, missing, read_tunables
from tests.support.plugins import provider_plugins
from tests.support.registry import Registry, bridge_gateway, lab_registry, push
from tests.support.tools import require, tools_env

CHARTS_ENV = "GPU_TENANCY_LAB_CHARTS"
PIP_CA_ENV = "GPU_TENANCY_PIP_CA"
# config key under `charts` -> its directory in CHARTS_ENV
CHART_DIRS = {"kamaji": "kamaji", "certManager": "cert-manager", "hami": "hami"}
STACK_FILE = "Pulumi.dev.yaml"
UP_TIMEOUT = 3600


def charts_dir() -> Path:
    where = os.environ.get(CHARTS_ENV, "")
    if not where:
        missing(f"{CHARTS_ENV} is not set: a directory holding the charts kamaji/, cert-manager/ and hami/")
    absent = [d for d in CHART_DIRS.values() if not (Path(where) / d / "Chart.yaml").is_file()]
    if absent:
        missing(f"no chart {', '.join(absent)} under {CHARTS_ENV}={where}")
    return Path(where)


def pip_ca() -> str | None:
    """The CA(s) pip's downloads are checked against (PIP_CA_ENV), when the host names them."""
    path = os.environ.get(PIP_CA_ENV, "")
    return Path(path).read_text() if path else None


def copy_project(dst: Path) -> None:
    """The project's files as git sees them (tracked and new, not ignored), and its .venv linked."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    if (ROOT / ".venv").is_dir():
        (dst / ".venv").symlink_to(ROOT / ".venv")


def lab_config(base: dict[str, Any], mirror: str, charts: Path, ca: str | None) -> dict[str, Any]:
    """Pulumi.dev.yaml for the lab: everything from this host and its registry, nothing else."""
    doc = copy.deepcopy(base)
    c = doc["config"]
    c["gpu-tenancy:cluster"]["nodeImage"] = LAB_NODE_REPOSITORY
    c["gpu-tenancy:mirror"] = {"endpoint": mirror}
    c["gpu-tenancy:images"] = {
        "releaserBase": ImageRef.parse(LAB_PYTHON_IMAGE).name,
        **({"pythonIndexCaCert": ca} if ca else {}),
    }
    c["gpu-tenancy:charts"] = {key: str(charts / d) for key, d in CHART_DIRS.items()}
    for tenant in c["gpu-tenancy:tenants"]:
        for w in tenant.get("workloads", []):
            w["image"] = ImageRef.parse(LAB_BUSYBOX_IMAGE).name
    return doc


@dataclass
class Peaks:
    """The most the lab used at once: host memory in use, summed container memory (the lab's
    containers and the Docker engine), summed CPU % (100 = one core), containers."""

    host_used_mib: float = 0.0
    lab_mib: float = 0.0
    cpu_percent: float = 0.0
    containers: int = 0
    samples: int = 0


def _mib(text: str) -> float:
    value = text.strip().split("/")[0].strip()
    for unit, factor in (("GiB", 1024.0), ("MiB", 1.0), ("KiB", 1 / 1024), ("kB", 1 / 1024), ("B", 1 / 1048576)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    return float(value or 0)


def _engine_mib() -> float:
    pids = subprocess.run(
        ["pidof", "dockerd", "containerd"], capture_output=True, text=True, check=False
    ).stdout.split()
    total = 0.0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += float(line.split()[1]) / 1024
    return total


def _host_used_mib() -> float:
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (float(info["MemTotal"].split()[0]) - float(info["MemAvailable"].split()[0])) / 1024


class Sampler:
    """docker stats of the lab's containers (by name prefix) and the engine's RSS, until stopped."""

    def __init__(self, prefix: str, interval: float = 2.0):
        self.prefix, self.interval, self.peaks = prefix, interval, Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            proc = subprocess.run(
                ["docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}\t{{.CPUPerc}}"],
                capture_output=True,
                text=True,
                check=False,
            )
            rows = [r.split("\t") for r in proc.stdout.splitlines() if r.startswith(self.prefix)]
            p = self.peaks
            p.lab_mib = max(p.lab_mib, sum(_mib(r[1]) for r in rows) + _engine_mib())
            p.cpu_percent = max(p.cpu_percent, sum(float(r[2].rstrip("%") or 0) for r in rows))
            p.containers = max(p.containers, len(rows))
            p.host_used_mib = max(p.host_used_mib, _host_used_mib())
            p.samples += 1

    def stop(self) -> Peaks:
        self._stop.set()
        self._thread.join(30)
        return self.peaks


def volumes() -> list[str]:
    return docker("volume", "ls", "--format", "{{.Name}}").splitlines()


class LabObjects:
    """A lab's Docker objects, by its `name` and the engine's `volumes_before` it (each lab's own
    dataclass holds both)."""

    name: str
    volumes_before: frozenset[str]

    def containers(self) -> list[str]:
        return lab_containers(self.name)

    def leftovers(self) -> list[str]:
        return lab_leftovers(self.name, self.volumes_before)

    def remove_leftovers(self) -> None:
        remove_items(self.leftovers())


@dataclass
class DevLab(LabObjects):
    work: Path
    env: dict[str, str]
    name: str
    registry: Registry
    seconds: dict[str, float] = field(default_factory=dict)
    # The engine's volumes before the lab: a node's /var is an anonymous volume, known by no name
    # the stack gives, so any volume that was not there before is the lab's.
    volumes_before: frozenset[str] = field(default_factory=lambda: frozenset(volumes()))

    def run(self, *command: str, timeout: float = UP_TIMEOUT) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout)

    def up(self, *args: str, label: str = "") -> subprocess.CompletedProcess:
        """The README's main command, timed under `label`."""
        start = time.monotonic()
        result = self.run("bash", "scripts/up-dev.sh", *args)
        if label:
            self.seconds[label] = time.monotonic() - start
        return result

    def pulumi(self, *args: str, timeout: float = UP_TIMEOUT) -> subprocess.CompletedProcess:
        return self.run("pulumi", *args, "--stack", "dev", timeout=timeout)

    def outputs(self) -> dict[str, Any]:
        result = self.pulumi("stack", "output", "--json", "--show-secrets", timeout=120)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def edit(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Change the stack file's config as a user edits Pulumi.dev.yaml."""
        path = self.work / STACK_FILE
        doc = yaml.safe_load(path.read_text())
        change(doc["config"])
        path.write_text(yaml.safe_dump(doc, sort_keys=False))


def lab_containers(name: str) -> list[str]:
    """The containers of the lab `name` (every Docker name the stacks give starts `<name>-`)."""
    names = docker("ps", "--all", "--format", "{{.Names}}").splitlines()
    return [n for n in names if n.startswith(f"{name}-")]


def lab_leftovers(name: str, volumes_before: frozenset[str]) -> list[str]:
    """The lab's Docker objects still present, by the names and label the stacks give them (and any
    volume that was not there before the lab: a node's /var is anonymous)."""
    found = [f"container {n}" for n in lab_containers(name)]
    found += [f"network {n}" for n in docker("network", "ls", "--format", "{{.Name}}").splitlines() if n == name]
    labelled = docker("volume", "ls", "--filter", f"label={TENANT_LABEL}", "--format", "{{.Name}}").splitlines()
    found += [f"volume {v}" for v in volumes() if v.startswith(f"{name}-") or v in labelled or v not in volumes_before]
    return found


def remove_items(items: list[str]) -> None:
    """Remove what `lab_leftovers` lists, by name."""
    for item in items:
        kind, obj = item.split(" ", 1)
        docker(kind, "rm", *([] if kind == "network" else ["--force"]), obj, check=False)


def image_refs(work: Path, env: dict[str, str], pulled_by: str, stack: str = "dev") -> list[str]:
    """The images a stack's nodes (through the mirror) or the engine pull, by the stack's own config."""
    proc = subprocess.run(
        [
            str(work / ".venv/bin/python"),
            "-m",
            "components.reports.image_list",
            "--stack",
            stack,
            "--refs",
            "--pulled-by",
            pulled_by,
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def absent_images(refs: list[str]) -> list[str]:
    """The references the Docker engine does not hold."""
    return [r for r in refs if not docker("image", "inspect", "--format", "{{.Id}}", r, check=False)]


@contextmanager
def dev_lab(scratch: Path, *also: Callable[[dict[str, Any]], None]) -> Iterator[DevLab]:
    """A lab ready to `up`: registry started and filled (with the images of the config as it is
    and as each of `also` changes it, e.g. an upgrade to come), the project copied and set for
    it. On the way out: destroy if anything is left, remove what a failed destroy left by name,
    stop the registry, and check the host's tunables are as they were."""
    env = provider_plugins(tools_env(), scratch / "plugins")
    require(env, "pulumi", skip=missing)
    ensure_engine()
    charts = charts_dir()
    base = yaml.safe_load((ROOT / STACK_FILE).read_text())
    name = base["config"]["gpu-tenancy:cluster"]["name"]
    if name in docker("network", "ls", "--format", "{{.Name}}").splitlines():
        missing(f"a Docker network {name!r} exists: another lab of this name runs here (destroy it first)")
    work = scratch / "project"
    work.mkdir()
    copy_project(work)
    # The stack's state and passphrase in the copy, as up-dev.sh keeps them (the file made here
    # once, so every later command, up-dev.sh's or not, opens the same state).
    passphrase = work / ".pulumi-passphrase"
    passphrase.write_text(secrets.token_urlsafe(32))
    passphrase.chmod(0o600)
    env = {k: v for k, v in env.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    env.update(
        PULUMI_BACKEND_URL=f"file://{work / '.pulumi-state'}",
        PULUMI_CONFIG_PASSPHRASE_FILE=str(passphrase),
    )
    before = read_tunables()
    guard = TunablesGuard()
    try:
        with lab_registry(scratch / "registry", bridge_gateway()) as reg:
            config = lab_config(base, reg.endpoint, charts, pip_ca())
            variants = [config]
            for change in also:
                changed = copy.deepcopy(config)
                change(changed["config"])
                variants.append(changed)
            nodes: list[str] = []
            engine: list[str] = []
            for variant in variants:
                (work / STACK_FILE).write_text(yaml.safe_dump(variant, sort_keys=False))
                nodes += [r for r in image_refs(work, env, "nodes") if r not in nodes]
                engine += [r for r in image_refs(work, env, "engine") if r not in engine]
            (work / STACK_FILE).write_text(yaml.safe_dump(config, sort_keys=False))
            absent = absent_images(nodes + engine)
            if absent:
                missing(f"not in the Docker engine: {', '.join(absent)} (tools/images/build.sh all; docs/lab.md)")
            push(reg, *nodes)
            lab = DevLab(work, env, name, reg)
            try:
                yield lab
            finally:
                if lab.leftovers():
                    lab.pulumi("destroy", "--yes", timeout=1800)
                lab.remove_leftovers()
    finally:
        guard.stop()
        assert read_tunables() == before, f"kernel tunables not put back: {guard.lines}"
