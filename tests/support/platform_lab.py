"""The platform and two team stacks run whole on this host, as their owners run them: each owner
with a checkout, a file backend and a passphrase of its own (Pulumi.platform.yaml,
Pulumi.team-a.yaml, Pulumi.team-b.yaml set for the lab as tests/support/dev_lab.py sets the dev
stack: the lab's node image, the local registry as the mirror, the charts from directories, the
lab's busybox for the workloads). The platform owner runs `pulumi up -s platform` and gives each
team its grant with scripts/grant-team.sh; team-a's stack is run as the platform owner would run
it for a team (with the host's Docker engine: its workers are containers); team-b's tenant is the
team's own machines only (its one pool external, no workload: their cards would be real ones), its
stack run with no Docker engine reachable, its machines node containers the tier makes as their
owner would and joins with the configuration the stack outputs. Used by the lab tier
(tests/lab/test_platform_lab.py).

Needs what dev_lab.py needs (its `missing` names each part), and the kamaji-etcd chart inside
Kamaji's (GPU_TENANCY_LAB_CHARTS/kamaji/charts/kamaji-etcd) for the teams' etcds.
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config import image_set
from components.config.image_refs import ImageRef
from components.config.load import load_stack_file
from components.config.versions import LAB_BUSYBOX_IMAGE, LAB_NODE_REPOSITORY, LAB_PYTHON_IMAGE
from components.nodes.node_container import NodeContainer
from components.nodes.registry_mirror import CONTAINERD, mirror_files
from tests.support.dev_lab import (
    CHART_DIRS,
    LabObjects,
    absent_images,
    charts_dir,
    copy_project,
    image_refs,
    pip_ca,
    volumes,
)
from tests.support.docker_lab import NODE_MEMORY_MIB, ROOT, TunablesGuard, docker, ensure_engine, missing, read_tunables
from tests.support.plugins import provider_plugins
from tests.support.registry import Registry, bridge_gateway, lab_registry, push
from tests.support.tools import path_without, require, tools_env

PLATFORM, TEAM_A, TEAM_B = "platform", "team-a", "team-b"
KAMAJI_ETCD_CHART = "kamaji/charts/kamaji-etcd"
# team-b's one pool: the team's own machines, and how many the tier makes.
OWN_POOL, OWN_MACHINES = "gpus", 1
UP_TIMEOUT = 3600
GRANT_HOURS = "24"
# What team-b's stack sees instead of the host's engine: none at all.
NO_DOCKER = "unix:///nonexistent/docker.sock"


@dataclass
class Checkout:
    """One owner's copy of the project with its stack's state and passphrase inside it, as
    up-dev.sh keeps them (.pulumi-state/, .pulumi-passphrase)."""

    stack: str
    work: Path
    env: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def stack_file(self) -> Path:
        return self.work / f"Pulumi.{self.stack}.yaml"

    def run(
        self, *command: str, timeout: float = UP_TIMEOUT, input: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, cwd=self.work, env=env or self.env, capture_output=True, text=True, timeout=timeout, input=input
        )

    def pulumi(self, *args: str, timeout: float = UP_TIMEOUT, input: str | None = None) -> subprocess.CompletedProcess:
        return self.run("pulumi", *args, "--stack", self.stack, timeout=timeout, input=input)

    def up(self, *args: str, label: str = "") -> subprocess.CompletedProcess:
        """`pulumi up --yes` of this stack, timed under `label`."""
        start = time.monotonic()
        result = self.pulumi("up", "--yes", *args)
        if label:
            self.seconds[label] = time.monotonic() - start
        return result

    def outputs(self) -> dict[str, Any]:
        result = self.pulumi("stack", "output", "--json", "--show-secrets", timeout=120)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def config(self) -> dict[str, Any]:
        return yaml.safe_load(self.stack_file.read_text())["config"]

    def edit(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Change the stack file's config as its owner edits it (secure values kept as they are)."""
        doc = yaml.safe_load(self.stack_file.read_text())
        change(doc["config"])
        self.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def secret(self, key: str) -> str:
        result = self.pulumi("config", "get", f"gpu-tenancy:{key}", timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()


def checkout(root: Path, stack: str, env: dict[str, str], config: dict[str, Any]) -> Checkout:
    """A copy of the project for `stack`'s owner, its stack file set to `config`, its stack made
    in a backend of its own under a passphrase of its own."""
    work = root / stack
    work.mkdir()
    copy_project(work)
    passphrase = work / ".pulumi-passphrase"
    passphrase.write_text(secrets.token_urlsafe(32))
    passphrase.chmod(0o600)
    (work / ".pulumi-state").mkdir()
    own = {k: v for k, v in env.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    own.update(PULUMI_BACKEND_URL=f"file://{work / '.pulumi-state'}", PULUMI_CONFIG_PASSPHRASE_FILE=str(passphrase))
    made = Checkout(stack, work, own)
    made.stack_file.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = made.run("pulumi", "stack", "init", stack, "--secrets-provider", "passphrase", timeout=120)
    assert result.returncode == 0, result.stderr
    return made


def stack_config(stack: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]


def platform_config(mirror: str, charts: Path) -> dict[str, Any]:
    """Pulumi.platform.yaml for the lab: the lab's node image, the mirror, the charts from directories."""
    c = copy.deepcopy(stack_config(PLATFORM))
    c["gpu-tenancy:cluster"]["nodeImage"] = LAB_NODE_REPOSITORY
    c["gpu-tenancy:mirror"] = {"endpoint": mirror}
    c["gpu-tenancy:charts"] = {
        "kamaji": str(charts / CHART_DIRS["kamaji"]),
        "certManager": str(charts / CHART_DIRS["certManager"]),
        "kamajiEtcd": str(charts / KAMAJI_ETCD_CHART),
    }
    return c


def team_config(stack: str, mirror: str, charts: Path, ca: str | None) -> dict[str, Any]:
    """A team's stack file for the lab: the platform's mirror, HAMi's chart from its directory, the
    lab's Python base for the release controller, the lab's busybox for the workloads."""
    c = copy.deepcopy(stack_config(stack))
    c["gpu-tenancy:mirror"] = {"endpoint": mirror}
    c["gpu-tenancy:images"] = {
        "releaserBase": ImageRef.parse(LAB_PYTHON_IMAGE).name,
        **({"pythonIndexCaCert": ca} if ca else {}),
    }
    c["gpu-tenancy:charts"] = {"hami": str(charts / CHART_DIRS["hami"])}
    c["gpu-tenancy:cluster"]["nodeImage"] = LAB_NODE_REPOSITORY
    for tenant in c["gpu-tenancy:tenants"]:
        for w in tenant.get("workloads", []):
            w["image"] = ImageRef.parse(LAB_BUSYBOX_IMAGE).name
    return c


def own_machines_only(config: dict[str, Any]) -> None:
    """team-b's tenant as the team's own machines only: one external pool, no workload (a GPU pod
    would wait for real cards the lab's machines do not have)."""
    (tenant,) = config["gpu-tenancy:tenants"]
    tenant["pools"] = [{"name": OWN_POOL, "mode": "external", "nodes": OWN_MACHINES}]
    tenant.pop("workloads", None)
    config["gpu-tenancy:cluster"].pop("nodeImage", None)


@dataclass
class PlatformLab(LabObjects):
    scratch: Path
    name: str
    network: str
    registry: Registry
    platform: Checkout
    teams: dict[str, Checkout]
    mirror: str
    # The engine's volumes before the lab (a node's /var is an anonymous volume).
    volumes_before: frozenset[str] = field(default_factory=lambda: frozenset(volumes()))
    machines: list[str] = field(default_factory=list)

    def grant(self, team: str, hours: str = GRANT_HOURS) -> subprocess.CompletedProcess:
        """scripts/grant-team.sh from the platform owner's checkout (docker mode: the admin
        kubeconfig read from the management node), onto the team's stack in the team's backend."""
        stack = self.teams[team]
        env = {**stack.env, "PULUMI_PROJECT_DIR": str(stack.work), "TEAM_STACK": stack.stack}
        env["PATH"] = self.platform.env["PATH"]  # the platform owner's host, its engine
        env.pop("DOCKER_HOST", None)
        return self.platform.run("bash", "scripts/grant-team.sh", team, hours, env=env, timeout=300)

    def start_machine(self, index: int, image: str) -> str:
        """One of team-b's own machines, as its owner makes it: a node container from the lab's
        node image on the platform's network, its containerd sent through the platform's mirror."""
        name = f"{self.name}-own-{TEAM_B}-{index}"
        cfg = load_stack_file(self.teams[TEAM_B].stack_file, secrets_set=True)
        files = mirror_files(cfg.mirror, image_set.mirror_registries(cfg), CONTAINERD)
        NodeContainer(name=name, image=image, memory_mib=NODE_MEMORY_MIB, files=tuple(sorted(files.items()))).start(
            self.network
        )
        self.machines.append(name)
        return name


@contextmanager
def platform_lab(scratch: Path) -> Iterator[PlatformLab]:
    """Three checkouts ready to `up` (platform, team-a, team-b), the registry started and filled
    with every image the three stacks' nodes pull. On the way out: destroy what is left (teams
    first), remove the owner's machines and whatever a failed destroy left by name, stop the
    registry, and check the host's tunables are as they were."""
    env = provider_plugins(tools_env(), scratch / "plugins")
    require(env, "pulumi", skip=missing)
    ensure_engine()
    charts = charts_dir()
    if not (charts / KAMAJI_ETCD_CHART / "Chart.yaml").is_file():
        missing(f"no chart {KAMAJI_ETCD_CHART} under {charts}")
    cluster = stack_config(PLATFORM)["gpu-tenancy:cluster"]
    name = cluster["name"]
    if name in docker("network", "ls", "--format", "{{.Name}}").splitlines():
        missing(f"a Docker network {name!r} exists: another lab of this name runs here (destroy it first)")
    before = read_tunables()
    guard = TunablesGuard()
    root = scratch / "owners"
    root.mkdir()
    try:
        with lab_registry(scratch / "registry", bridge_gateway()) as reg:
            platform = checkout(root, PLATFORM, env, platform_config(reg.endpoint, charts))
            a = checkout(root, TEAM_A, env, team_config(TEAM_A, reg.endpoint, charts, pip_ca()))
            b_config = team_config(TEAM_B, reg.endpoint, charts, pip_ca())
            own_machines_only(b_config)
            b = checkout(root, TEAM_B, env, b_config)
            # team-b's owner runs its stack where no Docker engine answers, and no docker CLI is installed
            b.env["DOCKER_HOST"] = NO_DOCKER
            b.env["PATH"] = path_without(("docker", "dockerd"), env["PATH"], scratch / "no-docker-bin")
            nodes: list[str] = []
            engine: list[str] = []
            for owner in (platform, a, b):
                nodes += [r for r in image_refs(owner.work, owner.env, "nodes", owner.stack) if r not in nodes]
                engine += [r for r in image_refs(owner.work, owner.env, "engine", owner.stack) if r not in engine]
            absent = absent_images(nodes + engine)
            if absent:
                missing(f"not in the Docker engine: {', '.join(absent)} (tools/images/build.sh all; docs/lab.md)")
            push(reg, *nodes)
            lab = PlatformLab(scratch, name, name, reg, platform, {TEAM_A: a, TEAM_B: b}, reg.endpoint)
            try:
                yield lab
            finally:
                for team in lab.teams.values():
                    team.pulumi("destroy", "--yes", "--continue-on-error", timeout=1800)
                for machine in lab.machines:
                    docker("rm", "--force", "--volumes", machine, check=False)
                if lab.leftovers():
                    platform.pulumi("destroy", "--yes", timeout=1800)
                lab.remove_leftovers()
    finally:
        guard.stop()
        assert read_tunables() == before, f"kernel tunables not put back: {guard.lines}"
