"""Platform then team stacks on one file backend, through the real engine and StackReferences,
against the real kube-apiserver: two teams side by side, a mismatched team refused, and the
destroy of one team leaving the other intact. (The Docker and Kamaji parts of the platform and
of a tenant cannot run here; these programs keep the parts that can: see their docstrings.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kubernetes import client

PROGRAMS = Path(__file__).parent / "programs"
CLUSTER = {"name": "gpu-platform", "subnet": "172.31.0.0/24", "managementIp": "172.31.0.2"}
TEAMS = [
    {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132},
    {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133},
]
pytestmark = pytest.mark.integration


def tenant(name: str, api: int, konn: int) -> dict:
    return {
        "name": name,
        "gpu": {"model": "L4", "cardsPerNode": 1},
        "apiPort": api,
        "konnectivityPort": konn,
        "quota": {"gpus": 10, "gpumemMb": 23034, "gpucoresPercent": 100},
    }


@pytest.fixture
def stacks(pulumi_cli, cluster, tmp_path):
    dirs = {}
    for name in ("platform_stub", "team_link"):
        dirs[name] = tmp_path / name
        shutil.copytree(PROGRAMS / name, dirs[name])
    core = cluster.core()
    for t in ("team-a", "team-b"):
        try:  # kept across tests: with no namespace controller a deleted namespace never goes away
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=f"tenant-{t}")))
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    p = dirs["platform_stub"]
    pulumi_cli("stack", "init", "platform", cwd=p)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=p)
    pulumi_cli("config", "set", "cluster", json.dumps(CLUSTER), cwd=p)
    pulumi_cli("config", "set", "teams", json.dumps(TEAMS), cwd=p)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=p)

    def team(stack: str, tenant_config: dict) -> Path:
        pulumi_cli("stack", "init", stack, cwd=dirs["team_link"])
        pulumi_cli("config", "set", "platformStack", "organization/platform-stub/platform", cwd=dirs["team_link"])
        pulumi_cli("config", "set", "cluster", json.dumps(CLUSTER), cwd=dirs["team_link"])
        pulumi_cli("config", "set", "tenants", json.dumps([tenant_config]), cwd=dirs["team_link"])
        return dirs["team_link"]

    yield team, dirs
    for stack in ("team-a", "team-b", "team-x"):
        pulumi_cli("destroy", "--yes", "--stack", stack, cwd=dirs["team_link"], check=False)
    pulumi_cli("destroy", "--yes", cwd=p, check=False)


def link_of(core, namespace: str) -> dict | None:
    try:
        return core.read_namespaced_config_map("platform-link", namespace).data
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_platform_then_two_teams_then_one_destroyed(pulumi_cli, cluster, stacks):
    team, _ = stacks
    core = cluster.core()
    work = team("team-a", tenant("team-a", 31443, 31132))
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-a", cwd=work)
    team("team-b", tenant("team-b", 31444, 31133))
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-b", cwd=work)
    out = json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", "--stack", "team-b", cwd=work).stdout)
    assert out["network"] == "lab-net"
    assert link_of(core, "tenant-team-a") == {"network": "lab-net", "apiPort": "31443"}
    assert link_of(core, "tenant-team-b") == {"network": "lab-net", "apiPort": "31444"}

    pulumi_cli("destroy", "--yes", "--stack", "team-a", cwd=work)
    assert link_of(core, "tenant-team-a") is None
    assert link_of(core, "tenant-team-b") == {"network": "lab-net", "apiPort": "31444"}
    pulumi_cli("preview", "--expect-no-changes", "--stack", "team-b", cwd=work)


def test_team_not_in_the_registry_is_refused_before_touching_the_platform(pulumi_cli, cluster, stacks):
    team, _ = stacks
    work = team("team-x", tenant("team-a", 31445, 31132))
    result = pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-x", cwd=work, check=False)
    assert result.returncode != 0
    assert "reserved 31443/31132 for it" in result.stdout + result.stderr
    assert link_of(cluster.core(), "tenant-team-a") is None
