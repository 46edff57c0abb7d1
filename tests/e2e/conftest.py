"""End-to-end tier: the reference lab's acceptance checks against a live dev stack on a Docker host.

Runs only where a Docker engine answers and the dev stack is up (scripts/up-dev.sh); otherwise
every test is skipped and says which of the two is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pulumi(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.setdefault("PULUMI_BACKEND_URL", f"file://{ROOT / '.pulumi-state'}")
    if "PULUMI_CONFIG_PASSPHRASE" not in env:
        env.setdefault("PULUMI_CONFIG_PASSPHRASE_FILE", str(ROOT / ".pulumi-passphrase"))
    return subprocess.run(["pulumi", *args, "--stack", "dev"], cwd=ROOT, env=env, capture_output=True, text=True)


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
    try:
        result = _pulumi("stack", "output", "--json", "--show-secrets")
    except FileNotFoundError:
        pytest.skip("no `pulumi` on PATH")
    if result.returncode != 0 or not result.stdout.strip() or result.stdout.strip() == "{}":
        pytest.skip(f"the dev stack is not up (run scripts/up-dev.sh): {result.stderr.strip()[:200]}")
    return json.loads(result.stdout)


def tenant_core(outputs: dict[str, Any], tenant: str) -> Any:
    from components.kube.client import core_api

    return core_api(outputs[tenant]["kubeconfig"])


@pytest.fixture(scope="session")
def team_a(outputs: dict[str, Any]) -> Any:
    return tenant_core(outputs, "team-a")


@pytest.fixture(scope="session")
def team_b(outputs: dict[str, Any]) -> Any:
    return tenant_core(outputs, "team-b")


@pytest.fixture(scope="session")
def pulumi_dev(outputs: dict[str, Any]):
    return _pulumi


@pytest.fixture(scope="session")
def workload_image(outputs: dict[str, Any]) -> str:
    """The image the dev stack's own first workload runs: one the lab's nodes can pull (a closed
    network's mirror holds it), for the tier's own GPU pods."""
    result = _pulumi("config", "get", "tenants", "--json")
    assert result.returncode == 0, result.stderr
    tenants = json.loads(json.loads(result.stdout)["value"])
    return next(w["image"] for t in tenants for w in t.get("workloads", []))
