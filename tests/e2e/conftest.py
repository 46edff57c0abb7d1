"""End-to-end tier: the reference lab's acceptance checks against live tenants on a Docker host.

By default the dev stack of this checkout (scripts/up-dev.sh). GPU_TENANCY_E2E_STACKS names other
stacks instead, each `DIR:STACK`, space-separated: a checkout holding its stack's state and
passphrase as up-dev.sh keeps them (`.pulumi-state/`, `.pulumi-passphrase`), e.g. the team stacks
of a platform, one per team, each in a checkout and backend of its own. Runs only where a Docker
engine answers and every stack is up; otherwise every test is skipped and says which is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACKS_ENV = "GPU_TENANCY_E2E_STACKS"


@dataclass(frozen=True)
class Stack:
    where: Path
    name: str
    # Its checkout's own backend and passphrase (a team stack); False: as the caller's env says.
    own_backend: bool

    def pulumi(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        state, passphrase = f"file://{self.where / '.pulumi-state'}", str(self.where / ".pulumi-passphrase")
        if self.own_backend:
            env = {k: v for k, v in env.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
            env.update(PULUMI_BACKEND_URL=state, PULUMI_CONFIG_PASSPHRASE_FILE=passphrase)
        else:
            env.setdefault("PULUMI_BACKEND_URL", state)
            if "PULUMI_CONFIG_PASSPHRASE" not in env:
                env.setdefault("PULUMI_CONFIG_PASSPHRASE_FILE", passphrase)
        return subprocess.run(
            ["pulumi", *args, "--stack", self.name], cwd=self.where, env=env, capture_output=True, text=True
        )


def stacks() -> list[Stack]:
    listed = os.environ.get(STACKS_ENV, "").split()
    if not listed:
        return [Stack(ROOT, "dev", own_backend=False)]
    return [Stack(Path(where), name, own_backend=True) for where, name in (item.rsplit(":", 1) for item in listed)]


@pytest.fixture(scope="session")
def docker_host() -> None:
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("no Docker engine answers `docker info`: the end-to-end tier needs the dev stack on a Docker host")


@pytest.fixture(scope="session")
def outputs(docker_host: None) -> dict[str, Any]:
    """Every tenant's outputs, from every stack under test (a tenant's name is its key)."""
    merged: dict[str, Any] = {}
    for stack in stacks():
        try:
            result = stack.pulumi("stack", "output", "--json", "--show-secrets")
        except FileNotFoundError:
            pytest.skip("no `pulumi` on PATH")
        if result.returncode != 0 or not result.stdout.strip() or result.stdout.strip() == "{}":
            pytest.skip(f"the stack {stack.name} is not up (run its `up`): {result.stderr.strip()[:200]}")
        merged.update(json.loads(result.stdout))
    return merged


def tenant_core(outputs: dict[str, Any], tenant: str) -> Any:
    from components.kube.client import core_api

    return core_api(outputs[tenant]["kubeconfig"])


@pytest.fixture(scope="session")
def team_a(outputs: dict[str, Any]) -> Any:
    return tenant_core(outputs, "team-a")


@pytest.fixture(scope="session")
def team_b(outputs: dict[str, Any]) -> Any:
    return tenant_core(outputs, "team-b")


def own_cards(outputs: dict[str, Any], tenant: str) -> bool:
    """A tenant of the team's own machines only: its cards are theirs (HAMi's NVIDIA plugin), not
    the fake inventory the lab's checks of cards and releases read."""
    return all(pool["mode"] == "external" for pool in outputs[tenant]["pools"].values())


@pytest.fixture(scope="session")
def skip_own_cards(outputs: dict[str, Any]) -> Callable[[str], None]:
    """Skips a check of fake cards for a tenant whose cards would be its machines' own, saying so."""

    def skip(tenant: str) -> None:
        if own_cards(outputs, tenant):
            pytest.skip(
                f"{tenant}'s pools are all external: its cards are its machines' own (NVIDIA's plugin), and the"
                " lab's machines have none"
            )

    return skip


@pytest.fixture(scope="session")
def pulumi_stacks(outputs: dict[str, Any]) -> list[Callable[..., subprocess.CompletedProcess]]:
    """Each stack under test's `pulumi ... --stack <name>`, in its own checkout and backend."""
    return [stack.pulumi for stack in stacks()]


@pytest.fixture(scope="session")
def workload_image(outputs: dict[str, Any]) -> str:
    """The image the stacks' own first workload runs: one the lab's nodes can pull (a closed
    network's mirror holds it), for the tier's own GPU pods."""
    for stack in stacks():
        result = stack.pulumi("config", "get", "tenants", "--json")
        assert result.returncode == 0, result.stderr
        tenants = json.loads(json.loads(result.stdout)["value"])
        images = [w["image"] for t in tenants for w in t.get("workloads", [])]
        if images:
            return images[0]
    raise AssertionError("no stack under test has a workload: the tier's GPU pods run the stacks' own image")
