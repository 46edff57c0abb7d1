"""Platform then team stacks on one file backend, through the real engine and StackReferences,
against the real kube-apiserver: the platform makes each team's namespace, identity and
control-plane policy and exports no credential; the owner grants each team a bound token with
scripts/grant-team.sh (the admin kubeconfig given as a file, as for an adopted cluster); each
team stack runs `up` and `destroy` on its own token; team-a's token cannot read or change
anything of team-b's, nor Kamaji's Secrets in its own namespace, nor run anything in the
control plane's namespace; a TenantControlPlane that reaches for another team's datastore keys
or ports, or mounts and runs extra things, is refused. (The Docker and Kamaji parts of the
platform and of a tenant cannot run here; these programs keep the parts that can.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.config.load import load_tenants
from components.ops.kube import api_client, cluster_ca, token_kubeconfig
from components.ops.team_token import token_seconds_left
from components.tenant.control_plane import control_plane_spec, datastore_schema
from tests.support.cluster import start_cluster
from tests.support.tools import require

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "programs"
CRDS = ROOT.parent / "shared" / "fixtures" / "kamaji" / "kamaji.clastix.io_tenantcontrolplanes.yaml"
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


@pytest.fixture(scope="module")
def cluster(tools):
    """Its own API server with the namespace controller and garbage collector (the platform's
    destroy deletes the teams' namespaces), and Kamaji's TenantControlPlane CRD."""
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    if not CRDS.exists():
        pytest.skip(f"Kamaji's CRD schema is not beside the repo ({CRDS.relative_to(ROOT.parent)})")
    c = start_cluster(tools)
    c.start_controller_manager(["namespace", "garbagecollector"])
    client.ApiextensionsV1Api(c.api_client()).create_custom_resource_definition(yaml.safe_load(CRDS.read_text()))
    yield c
    c.stop()


@pytest.fixture
def stacks(pulumi_cli, cluster, tmp_path):
    dirs = {}
    for name in ("platform_stub", "team_link"):
        dirs[name] = tmp_path / name
        shutil.copytree(PROGRAMS / name, dirs[name])
    p = dirs["platform_stub"]
    pulumi_cli("stack", "init", "platform", cwd=p)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=p)
    pulumi_cli("config", "set", "cluster", json.dumps(CLUSTER), cwd=p)
    pulumi_cli("config", "set", "teams", json.dumps(TEAMS), cwd=p)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=p)
    admin = tmp_path / "admin.kubeconfig"  # what the owner of an adopted cluster holds
    admin.write_text(cluster.kubeconfig_text)

    def team(stack: str, tenant_config: dict, grant: str | None = None) -> Path:
        work = dirs["team_link"]
        pulumi_cli("stack", "init", stack, cwd=work)
        pulumi_cli("config", "set", "platformStack", "organization/platform-stub/platform", cwd=work)
        pulumi_cli("config", "set", "cluster", json.dumps(CLUSTER), cwd=work)
        pulumi_cli("config", "set", "tenants", json.dumps([tenant_config]), cwd=work)
        if grant:
            env = {**os.environ, **pulumi_cli.env, "MANAGEMENT_KUBECONFIG": str(admin), "TEAM_STACK": stack}
            env["PULUMI_PROJECT_DIR"] = str(work)
            done = subprocess.run(
                ["bash", str(ROOT / "scripts" / "grant-team.sh"), grant, "2"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
        return work

    yield team, dirs
    for stack in ("team-a", "team-b", "team-x"):
        pulumi_cli("destroy", "--yes", "--stack", stack, cwd=dirs["team_link"], check=False)
    pulumi_cli("destroy", "--yes", cwd=p, check=False)


def control_plane(cluster, team: str) -> dict | None:
    """The team's TenantControlPlane's schema and ports, as its stack made it (None if absent)."""
    try:
        tcp = client.CustomObjectsApi(cluster.api_client()).get_namespaced_custom_object(
            "kamaji.clastix.io", "v1alpha1", f"tenant-{team}", "tenantcontrolplanes", team
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    spec = tcp["spec"]
    return {"schema": spec["dataStoreSchema"], "port": spec["networkProfile"]["port"]}


def token_of(pulumi_cli, work: Path, stack: str) -> str:
    return pulumi_cli("config", "get", "managementToken", "--stack", stack, cwd=work).stdout.strip()


def status(call, *args, **kwargs) -> int:
    try:
        call(*args, **kwargs)
        return 200
    except client.ApiException as exc:
        return exc.status


def test_teams_on_their_own_tokens(pulumi_cli, cluster, stacks):
    team, dirs = stacks
    core = cluster.core()
    platform = json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=dirs["platform_stub"]).stdout)
    # the platform's outputs carry no credential: server and CA only
    text = json.dumps(platform)
    assert "managementKubeconfig" not in text and "token" not in text.lower() and "PRIVATE KEY" not in text
    assert platform["platform"]["managementCa"] == cluster_ca(cluster.kubeconfig_text)

    work = team("team-a", tenant("team-a", 31443, 31132), grant="team-a")
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-a", cwd=work)
    team("team-b", tenant("team-b", 31444, 31133), grant="team-b")
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-b", cwd=work)
    assert control_plane(cluster, "team-a") == {"schema": "gpu_tenancy_team_a_team_a", "port": 31443}
    assert control_plane(cluster, "team-b") == {"schema": "gpu_tenancy_team_b_team_b", "port": 31444}
    stack_file = yaml.safe_load((work / "Pulumi.team-a.yaml").read_text())
    assert "secure" in stack_file["config"]["team-link:managementToken"]  # a Pulumi secret in the stack file

    token = token_of(pulumi_cli, work, "team-a")
    left = token_seconds_left(token)
    assert left is not None and 2 * 3600 - 120 < left <= 2 * 3600  # bound, expiring: the hours asked for
    as_a = api_client(token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token))
    a_core, a_apps, a_custom = client.CoreV1Api(as_a), client.AppsV1Api(as_a), client.CustomObjectsApi(as_a)
    tcp = ("kamaji.clastix.io", "v1alpha1")
    # Kamaji's other Secrets in team-a's own namespace (certificates, datastore credentials)
    core.create_namespaced_secret("tenant-team-a", {"metadata": {"name": "team-a-datastore-config"}})
    core.create_namespaced_secret("tenant-team-b", {"metadata": {"name": "team-b-admin-kubeconfig"}})
    assert status(a_core.list_namespaced_secret, "tenant-team-b") == 403
    assert status(a_core.read_namespaced_secret, "team-b-admin-kubeconfig", "tenant-team-b") == 403
    assert status(a_custom.get_namespaced_custom_object, *tcp, "tenant-team-b", "tenantcontrolplanes", "team-b") == 403
    assert (
        status(a_custom.delete_namespaced_custom_object, *tcp, "tenant-team-b", "tenantcontrolplanes", "team-b") == 403
    )
    assert status(a_custom.list_cluster_custom_object, *tcp, "tenantcontrolplanes") == 403
    assert status(a_core.list_namespaced_secret, "tenant-team-a") == 403
    assert status(a_core.read_namespaced_secret, "team-a-datastore-config", "tenant-team-a") == 403
    assert status(a_custom.get_namespaced_custom_object, *tcp, "tenant-team-a", "tenantcontrolplanes", "team-a") == 200
    assert status(a_core.list_pod_for_all_namespaces) == 403
    assert status(a_core.create_namespace, {"metadata": {"name": "mine"}}) == 403
    deployment = {
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }
    assert status(a_apps.create_namespaced_deployment, "tenant-team-a", deployment, dry_run="All") == 403
    assert status(a_apps.create_namespaced_deployment, "tenant-team-b", deployment, dry_run="All") == 403

    pulumi_cli("destroy", "--yes", "--stack", "team-a", cwd=work)
    assert control_plane(cluster, "team-a") is None
    assert control_plane(cluster, "team-b") == {"schema": "gpu_tenancy_team_b_team_b", "port": 31444}
    pulumi_cli("preview", "--expect-no-changes", "--stack", "team-b", cwd=work)


def test_a_teams_control_plane_is_held_to_its_own_keys_and_ports(pulumi_cli, cluster, stacks):
    team, _ = stacks
    work = team("team-a", tenant("team-a", 31443, 31132), grant="team-a")
    token = token_of(pulumi_cli, work, "team-a")
    custom = client.CustomObjectsApi(
        api_client(token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token))
    )
    (t,) = load_tenants("gpu-tenancy", [tenant("team-a", 31443, 31132)], CLUSTER)
    spec = control_plane_spec(t, "172.31.0.2", "default", datastore_schema("gpu-tenancy", "team-a", "team-a"))

    def create(change: dict | None = None, namespace: str = "tenant-team-a") -> str:
        body = {
            "apiVersion": "kamaji.clastix.io/v1alpha1",
            "kind": "TenantControlPlane",
            "metadata": {"name": "team-a"},
            "spec": json.loads(json.dumps(spec)),
        }
        for path, value in (change or {}).items():
            node = body["spec"]
            *parents, leaf = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        try:
            custom.create_namespaced_custom_object(
                "kamaji.clastix.io", "v1alpha1", namespace, "tenantcontrolplanes", body, dry_run="All"
            )
            return ""
        except client.ApiException as exc:
            return f"{exc.status} {exc.body}"

    assert create() == ""  # the program's own spec
    b_schema = datastore_schema("gpu-tenancy", "team-b", "team-b")
    refused = {
        "another team's keys": {"dataStoreSchema": b_schema, "dataStoreUsername": b_schema},
        "another datastore": {"dataStore": "other"},
        "another team's port": {"networkProfile.port": 31444},
        "another konnectivity port": {"addons.konnectivity.server.port": 31133},
        "a host path": {"controlPlane.deployment.additionalVolumes": [{"name": "h", "hostPath": {"path": "/"}}]},
        "extra arguments": {"controlPlane.deployment.extraArgs": {"apiServer": ["--etcd-prefix=/x"]}},
        "a service account": {"controlPlane.deployment.serviceAccountName": "kamaji"},
    }
    for case, change in refused.items():
        said = create(change)
        assert said.startswith(("403", "422")) and "team team-a's control plane" in said, f"{case}: {said}"
    assert create(namespace="tenant-team-b").startswith("403")  # and none in another team's namespace
