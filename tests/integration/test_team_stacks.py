"""Platform then team stacks through the real engine against the real kube-apiserver: the
platform makes each team's namespace, identity, control-plane policy and published record and
exports nothing; the owner grants each team a bound token, the API server's URL and CA with
scripts/grant-team.sh (the admin kubeconfig given as a file, as for an adopted cluster); each team
stack reads its record with that token (never the platform's state: the stacks are in backends of
their own) and runs `up` and `destroy` on it; team-a's token cannot read or change anything of
team-b's, nor write its own record, nor read Kamaji's Secrets in its own namespace, nor run
anything in the control plane's namespace; a TenantControlPlane that reaches for another team's datastore keys
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
from components.config.versions import KONNECTIVITY_VERSION
from components.domain.names import PLATFORM_RECORD, TEAM_ACCOUNT, datastore_schema
from components.kube.client import api_client, cluster_ca, cluster_server, token_kubeconfig
from components.kube.platform_record import PlatformUnreadable, read_platform_record
from components.kube.team_token import token_seconds_left
from components.kube.waiting import wait_until
from components.platform.team_access import CONTAINER_LIMITS, CONTROL_PLANE_QUOTA
from components.tenant.control_plane import control_plane_spec
from tests.support.cluster import start_cluster
from tests.support.kamaji_crd import crd
from tests.support.tools import PulumiCli, path_without, require

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "programs"
CLUSTER = {"name": "gpu-platform", "subnet": "172.31.0.0/24", "managementIp": "172.31.0.2"}
TEAMS = [
    {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132},
    {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133},
    # its schema, named the old way, was a suffix of team-a's
    {"name": "a", "apiPort": 31445, "konnectivityPort": 31134},
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
    tcp_crd = crd()
    c = start_cluster(tools)
    c.start_controller_manager(
        [
            "namespace",
            "garbagecollector",
            "serviceaccount",
            "resourcequota",
            "validatingadmissionpolicy-status-controller",
        ]
    )
    client.ApiextensionsV1Api(c.api_client()).create_custom_resource_definition(tcp_crd)
    yield c
    c.stop()


@pytest.fixture
def stacks(pulumi_cli, cluster, tmp_path):
    dirs = {}
    for name in ("platform_stub", "team_link"):
        dirs[name] = tmp_path / name
        shutil.copytree(PROGRAMS / name, dirs[name])
    p = dirs["platform_stub"]
    # The platform's state in a backend of its own under a passphrase of its own: the team stacks
    # could not read it if they tried.
    (tmp_path / "platform-state").mkdir()
    platform_cli = PulumiCli(pulumi_cli.env, tmp_path / "platform-state")
    platform_cli.env["PULUMI_CONFIG_PASSPHRASE"] = "the platform owner's alone"
    platform_cli("stack", "init", "platform", cwd=p)
    platform_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=p)
    platform_cli("config", "set", "cluster", json.dumps(CLUSTER), cwd=p)
    platform_cli("config", "set", "teams", json.dumps(TEAMS), cwd=p)
    platform_cli("up", "--yes", "--skip-preview", cwd=p)
    admin = tmp_path / "admin.kubeconfig"  # what the owner of an adopted cluster holds
    admin.write_text(cluster.kubeconfig_text)

    def team(stack: str, tenant_config: dict, grant: str | None = None) -> Path:
        work = dirs["team_link"]
        pulumi_cli("stack", "init", stack, cwd=work)
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

    yield team, dirs, platform_cli
    for stack in ("team-a", "team-b", "team-x", "a"):
        pulumi_cli("destroy", "--yes", "--stack", stack, cwd=dirs["team_link"], check=False)
    platform_cli("destroy", "--yes", cwd=p, check=False)


def test_a_team_of_its_own_machines_needs_no_docker(pulumi_cli, cluster, stacks, tmp_path):
    """The project's own program as a team stack whose tenant is the team's machines only, through
    the engine on a PATH with no `docker` (nor dockerd): its graph holds no Docker resource, and
    what it does hold reaches the management cluster with the team's grant alone."""
    team, _, _ = stacks
    work = tmp_path / "project"
    work.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(ROOT / "components", work / "components", ignore=shutil.ignore_patterns("__pycache__"))
    (work / ".venv").symlink_to(ROOT / ".venv")
    pulumi_cli("stack", "init", "team-b", cwd=work)
    machines_only = {**tenant("team-b", 31444, 31133), "pools": [{"name": "gpus", "mode": "external", "nodes": 2}]}
    for key, value in (("role", "team"), ("cluster", json.dumps(CLUSTER)), ("tenants", json.dumps([machines_only]))):
        pulumi_cli("config", "set", f"gpu-tenancy:{key}", value, cwd=work)
    env = {**os.environ, **pulumi_cli.env}
    admin = tmp_path / "owner-admin.kubeconfig"
    admin.write_text(cluster.kubeconfig_text)
    env.update(MANAGEMENT_KUBECONFIG=str(admin), TEAM_STACK="team-b", PULUMI_PROJECT_DIR=str(work))
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "grant-team.sh"), "team-b", "2"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    no_docker = PulumiCli(pulumi_cli.env, Path(pulumi_cli.env["PULUMI_BACKEND_URL"].removeprefix("file://")))
    no_docker.env["PATH"] = path_without(("docker", "dockerd"), pulumi_cli.env["PATH"], tmp_path / "bin")
    assert shutil.which("docker", path=no_docker.env["PATH"]) is None
    result = no_docker("preview", "--stack", "team-b", cwd=work)
    out = result.stdout
    for name in ("team-b-cp-tcp", "team-b-gpus-token", "team-b-machines", "team-b-hami-release"):
        assert name in out, out
    assert "docker:" not in out and "command:" not in out and "ReleaseControllerImage" not in out, out


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


def konnectivity_versions(cluster, team: str) -> tuple[str | None, str | None]:
    """The server's and agent's Konnectivity versions of the team's TenantControlPlane."""
    tcp = client.CustomObjectsApi(cluster.api_client()).get_namespaced_custom_object(
        "kamaji.clastix.io", "v1alpha1", f"tenant-{team}", "tenantcontrolplanes", team
    )
    konnectivity = tcp["spec"]["addons"]["konnectivity"]
    return konnectivity["server"].get("version"), konnectivity["agent"].get("version")


def token_of(pulumi_cli, work: Path, stack: str) -> str:
    return pulumi_cli("config", "get", "managementToken", "--stack", stack, cwd=work).stdout.strip()


def status(call, *args, **kwargs) -> int:
    try:
        call(*args, **kwargs)
        return 200
    except client.ApiException as exc:
        return exc.status


def test_teams_on_their_own_tokens(pulumi_cli, cluster, stacks):
    team, dirs, platform_cli = stacks
    core = cluster.core()
    # the platform exports nothing: what a team needs is in its own namespace
    platform = json.loads(platform_cli("stack", "output", "--json", "--show-secrets", cwd=dirs["platform_stub"]).stdout)
    assert platform == {}

    work = team("team-a", tenant("team-a", 31443, 31132), grant="team-a")
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-a", cwd=work)
    team("team-b", tenant("team-b", 31444, 31133), grant="team-b")
    pulumi_cli("up", "--yes", "--skip-preview", "--stack", "team-b", cwd=work)
    assert control_plane(cluster, "team-a") == {"schema": "gpu_tenancy_team_a_team_a", "port": 31443}
    assert control_plane(cluster, "team-b") == {"schema": "gpu_tenancy_team_b_team_b", "port": 31444}
    # admitted under the policy with the pinned Konnectivity (Kamaji's own pick for v1.35 is not published)
    for name in ("team-a", "team-b"):
        assert konnectivity_versions(cluster, name) == (KONNECTIVITY_VERSION, KONNECTIVITY_VERSION)
    # the grant: the token a Pulumi secret, the API server and its CA as the admin kubeconfig names them
    stack_file = yaml.safe_load((work / "Pulumi.team-a.yaml").read_text())["config"]
    assert "secure" in stack_file["team-link:managementToken"]
    assert stack_file["team-link:managementServer"] == cluster_server(cluster.kubeconfig_text)
    assert stack_file["team-link:managementCa"] == cluster_ca(cluster.kubeconfig_text)
    assert json.loads(pulumi_cli("stack", "output", "--json", "--stack", "team-a", cwd=work).stdout) == {
        "network": "lab-net"
    }

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
    # the platform's record: team-a reads its own, cannot change or delete it, nor read team-b's
    record = a_core.read_namespaced_config_map(PLATFORM_RECORD, "tenant-team-a")
    assert record.data["schema"] == "gpu_tenancy_team_a_team_a" and record.data["apiPort"] == "31443"
    assert status(a_core.read_namespaced_config_map, PLATFORM_RECORD, "tenant-team-b") == 403
    assert status(a_core.list_namespaced_config_map, "tenant-team-a") == 403
    changed = {"data": {"datastore": "other", "schema": "gpu_tenancy_team_b_team_b"}}
    assert status(a_core.patch_namespaced_config_map, PLATFORM_RECORD, "tenant-team-a", changed) == 403
    assert status(a_core.replace_namespaced_config_map, PLATFORM_RECORD, "tenant-team-a", record) == 403
    assert status(a_core.delete_namespaced_config_map, PLATFORM_RECORD, "tenant-team-a") == 403
    made = {"metadata": {"name": "gpu-tenancy-platform-2"}, "data": {}}
    assert status(a_core.create_namespaced_config_map, "tenant-team-a", made) == 403
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

    # the record read as a team stack reads it: with team-a's token; refused with none of the platform's
    server, ca = f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text)
    assert read_platform_record(server, ca, token, "team-a").datastore == "etcd-team-a"
    with pytest.raises(PlatformUnreadable, match="namespace tenant-team-a .*the token was refused"):
        read_platform_record(server, ca, "not-a-token", "team-a")
    with pytest.raises(PlatformUnreadable, match="namespace tenant-team-b .*may not read it"):
        read_platform_record(server, ca, token, "team-b")
    # a team stack holding team-b's token for team-a's tenant stops, naming the namespace it cannot read
    b_token = token_of(pulumi_cli, work, "team-b")
    pulumi_cli("config", "set", "--secret", "managementToken", "--stack", "team-a", cwd=work, stdin=b_token)
    refused = pulumi_cli("preview", "--stack", "team-a", cwd=work, check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "ConfigMap gpu-tenancy-platform in namespace tenant-team-a" in said, said
    assert "may not read it" in said and "Traceback" not in said, said
    pulumi_cli("config", "set", "--secret", "managementToken", "--stack", "team-a", cwd=work, stdin=token)

    pulumi_cli("destroy", "--yes", "--stack", "team-a", cwd=work)
    assert control_plane(cluster, "team-a") is None
    assert control_plane(cluster, "team-b") == {"schema": "gpu_tenancy_team_b_team_b", "port": 31444}
    pulumi_cli("preview", "--expect-no-changes", "--stack", "team-b", cwd=work)


def test_a_grant_in_docker_mode_needs_nothing_of_the_platforms_backend(pulumi_cli, cluster, stacks, tmp_path):
    """grant-team.sh as the platform owner of a docker-mode lab runs it for a team stack kept in a
    backend of its own: the lab's name comes from Pulumi.platform.yaml (not from a `pulumi config
    get` of a stack that backend does not hold), the admin kubeconfig from the management node.
    `docker` here is a stand-in that answers only for that node and that file."""
    team, _, _ = stacks
    work = team("team-a", tenant("team-a", 31443, 31132))
    lab = yaml.safe_load((ROOT / "Pulumi.platform.yaml").read_text())["config"]["gpu-tenancy:cluster"]["name"]
    admin = tmp_path / "admin.conf"
    admin.write_text(cluster.kubeconfig_text)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "docker").write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "container inspect {lab}-management" ] && exit 0\n'
        f'[ "$*" = "exec {lab}-management cat /etc/kubernetes/admin.conf" ] && exec cat {admin}\n'
        'echo "unexpected: docker $*" >&2; exit 9\n'
    )
    (shim / "docker").chmod(0o755)
    env = {**os.environ, **pulumi_cli.env, "TEAM_STACK": "team-a", "PULUMI_PROJECT_DIR": str(work)}
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    env.pop("MANAGEMENT_KUBECONFIG", None)
    assert "platform" not in pulumi_cli("stack", "ls", cwd=work).stdout  # the team's backend holds no platform
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "grant-team.sh"), "team-a", "2"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stack_file = yaml.safe_load((work / "Pulumi.team-a.yaml").read_text())["config"]
    assert stack_file["team-link:managementServer"] == cluster_server(cluster.kubeconfig_text)
    assert token_seconds_left(token_of(pulumi_cli, work, "team-a")) is not None


def test_a_teams_control_plane_is_held_to_its_own_keys_and_ports(pulumi_cli, cluster, stacks):
    """Issue items 1 and 2 on the real API server, with Kamaji's CRD and the team's own token:
    the program's spec passes, anything of the shared cluster's a team could choose is refused
    naming its field, the neighbour `a`'s suffix reaches none of team-a's keys, and the quota holds
    one control plane per team."""
    team, dirs, _ = stacks
    work = team("team-a", tenant("team-a", 31443, 31132), grant="team-a")
    team("a", tenant("a", 31445, 31134), grant="a")

    def custom_of(stack: str) -> client.CustomObjectsApi:
        token = token_of(pulumi_cli, work, stack)
        kubeconfig = token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token)
        return client.CustomObjectsApi(api_client(kubeconfig))

    as_team_a, as_a = custom_of("team-a"), custom_of("a")
    (t,) = load_tenants("gpu-tenancy", [tenant("team-a", 31443, 31132)], CLUSTER)
    spec = control_plane_spec(t, "172.31.0.2", "etcd-team-a", datastore_schema("gpu-tenancy", "team-a", "team-a"))

    def body(change: dict | None = None, name: str = "team-a") -> dict:
        made = {
            "apiVersion": "kamaji.clastix.io/v1alpha1",
            "kind": "TenantControlPlane",
            "metadata": {"name": name},
            "spec": json.loads(json.dumps(spec)),
        }
        for path, value in (change or {}).items():
            node = made["spec"]
            *parents, leaf = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        return made

    def create(
        change: dict | None = None, namespace: str = "tenant-team-a", who=None, name: str = "team-a", dry: bool = True
    ) -> str:
        try:
            (who or as_team_a).create_namespaced_custom_object(
                "kamaji.clastix.io",
                "v1alpha1",
                namespace,
                "tenantcontrolplanes",
                body(change, name),
                **({"dry_run": "All"} if dry else {}),
            )
            return ""
        except client.ApiException as exc:
            return f"{exc.status} {exc.body}"

    # the policy type-checks against the CRD's schema: no expression the API server cannot run
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    policy = wait_until(
        lambda: (
            (p := admission.read_validating_admission_policy("gpu-tenancy-team-team-a")).status
            and p.status.type_checking
            and p
        ),
        timeout=60,
        what="the API server's type check of team-a's control-plane policy",
    )
    assert not policy.status.type_checking.expression_warnings, policy.status.type_checking.expression_warnings

    konnectivity = spec["addons"]["konnectivity"]
    assert konnectivity["server"]["version"] == konnectivity["agent"]["version"] == KONNECTIVITY_VERSION
    assert create() == ""  # the program's own spec, Konnectivity at the pinned version
    allowed = {
        "three replicas": {"controlPlane.deployment.replicas": 3},
        "its API server's resources": {
            "controlPlane.deployment.resources": {"apiServer": {"requests": {"cpu": "200m"}}}
        },
        "its own CoreDNS image": {"addons.coreDNS": {"imageRepository": "registry.example/coredns", "imageTag": "v1"}},
        "its own agent's arguments": {"addons.konnectivity.agent": {"mode": "DaemonSet", "extraArgs": ["--v=4"]}},
        "its own agent's version": {"addons.konnectivity.agent.version": "v0.35.0"},  # on its own workers
        "the CRD's own default registry": {"controlPlane.deployment.registrySettings": {"registry": "registry.k8s.io"}},
        "its own API server read-only": {"writePermissions": {"blockCreation": True}},
        "its own admission plugins": {"kubernetes.admissionControllers": ["NodeRestriction", "ResourceQuota"]},
    }
    for case, change in allowed.items():
        assert create(change) == "", case
    a_schema = datastore_schema("gpu-tenancy", "a", "a")
    privileged = {"privileged": True}
    refused = {
        # (change, the field the refusal names)
        "another team's keys": ({"dataStoreSchema": b_schema(), "dataStoreUsername": b_schema()}, "dataStoreSchema"),
        "team a's keys": ({"dataStoreSchema": a_schema, "dataStoreUsername": a_schema}, "dataStoreSchema"),
        "its keys under another user": ({"dataStoreUsername": b_schema()}, "dataStoreUsername"),
        "another datastore": ({"dataStore": "other"}, "spec.dataStore"),
        "another team's datastore": ({"dataStore": "etcd-team-b"}, "spec.dataStore must be the team's own DataStore"),
        "the lab's shared datastore": ({"dataStore": "default"}, "spec.dataStore"),
        "no datastore (Kamaji's default)": ({"dataStore": None}, "spec.dataStore"),
        "some resources in another datastore": (
            {"dataStoreOverrides": [{"resource": "/events", "dataStore": "other"}]},
            "spec.dataStoreOverrides",
        ),
        "another team's port": ({"networkProfile.port": 31444}, "spec.networkProfile.port"),
        "another konnectivity port": ({"addons.konnectivity.server.port": 31133}, "konnectivity.server.port"),
        "a load balancer": ({"controlPlane.service.serviceType": "LoadBalancer"}, "serviceType"),
        "fifty replicas": ({"controlPlane.deployment.replicas": 50}, "spec.controlPlane.deployment.replicas"),
        "a foreign registry": (
            {"controlPlane.deployment.registrySettings": {"registry": "evil.example"}},
            "registrySettings.registry",
        ),
        "a foreign API server image": (
            {"controlPlane.deployment.registrySettings": {"apiServerImage": "miner"}},
            "registrySettings.apiServerImage",
        ),
        "a privileged API server": (
            {"controlPlane.deployment.containerSecurityContexts": {"apiServer": privileged}},
            "containerSecurityContexts",
        ),
        "a privileged konnectivity server": (
            {"addons.konnectivity.server.securityContext": privileged},
            "konnectivity.server.securityContext",
        ),
        "a konnectivity server image": (
            {"addons.konnectivity.server.image": "evil.example/proxy"},
            "konnectivity.server.image",
        ),
        "another konnectivity server version": (
            {"addons.konnectivity.server.version": "v0.35.0"},
            "spec.addons.konnectivity.server.version",
        ),
        "no konnectivity server version (Kamaji's own pick)": (
            {"addons.konnectivity.server": {"port": 31132}},
            "spec.addons.konnectivity.server.version",
        ),
        "konnectivity server arguments": (
            {"addons.konnectivity.server.extraArgs": ["--v=10"]},
            "konnectivity.server.extraArgs",
        ),
        "a host path": (
            {"controlPlane.deployment.additionalVolumes": [{"name": "h", "hostPath": {"path": "/"}}]},
            "additionalVolumes",
        ),
        "a sidecar": (
            {"controlPlane.deployment.additionalContainers": [{"name": "x", "image": "evil.example/x"}]},
            "additionalContainers",
        ),
        "extra arguments": ({"controlPlane.deployment.extraArgs": {"apiServer": ["--etcd-prefix=/x"]}}, "extraArgs"),
        "a service account": ({"controlPlane.deployment.serviceAccountName": "kamaji"}, "serviceAccountName"),
        "a node of its choice": ({"controlPlane.deployment.nodeSelector": {"node-role": "cp"}}, "nodeSelector"),
        "a runtime class": ({"controlPlane.deployment.runtimeClassName": "unconfined"}, "runtimeClassName"),
        "pod labels another service selects": (
            {"controlPlane.deployment.podAdditionalMetadata": {"labels": {"app": "kamaji"}}},
            "podAdditionalMetadata",
        ),
        "an ingress hostname": ({"controlPlane.ingress": {"hostname": "team-b.example"}}, "spec.controlPlane.ingress"),
        "an external IP": ({"networkProfile.allowAddressAsExternalIP": True}, "allowAddressAsExternalIP"),
        "an extra service port": (
            {"controlPlane.service.additionalPorts": [{"name": "x", "port": 8080, "targetPort": 8080}]},
            "additionalPorts",
        ),
    }
    for case, (change, field) in refused.items():
        said = create(change)
        assert said.startswith(("403", "422")) and "team team-a's control plane" in said, f"{case}: {said}"
        assert field in said, f"{case}: the refusal does not name {field}: {said}"
    said = create({"addons.konnectivity.server.version": "v0.35.0"})
    assert f"spec.addons.konnectivity.server.version must be '{KONNECTIVITY_VERSION}'" in said, said
    # team `a` (its schema a suffix of team-a's) holds its own keys and none of team-a's
    a_spec = {"dataStoreSchema": a_schema, "dataStoreUsername": a_schema, "networkProfile.port": 31445}
    a_spec["dataStore"] = "etcd-a"
    a_spec["addons.konnectivity.server.port"] = 31134
    assert create(a_spec, namespace="tenant-a", who=as_a, name="a") == ""
    t_a = {**a_spec, "dataStoreSchema": spec["dataStoreSchema"], "dataStoreUsername": spec["dataStoreUsername"]}
    said = create(t_a, namespace="tenant-a", who=as_a, name="a")
    assert said.startswith(("403", "422")) and "team a's control plane" in said and "dataStoreSchema" in said, said
    assert create(namespace="tenant-team-b").startswith("403")  # and none in another team's namespace
    # one control plane per team: the quota refuses a second
    assert create(dry=False) == ""
    wait_until(
        lambda: (
            (q := cluster.core().read_namespaced_resource_quota(TEAM_ACCOUNT, "tenant-team-a")).status.used
            and q.status.used.get("count/tenantcontrolplanes.kamaji.clastix.io") == "1"
        ),
        timeout=60,
        what="the quota controller to count team-a's control plane",
    )
    said = create(name="team-a-second")
    assert said.startswith("403") and "exceeded quota" in said and "tenantcontrolplanes" in said, said


def test_a_teams_namespace_bounds_its_control_plane_pods(cluster, stacks):
    """The quota and LimitRange the platform puts in each team's namespace, as Kamaji's pods meet
    them (created here as the admin, as Kamaji's controller would): a container without requests
    or limits gets LimitRange's, one over its memory cap is refused, memory limits beyond the
    quota are refused, and so are pods beyond its count."""
    stacks[0]("team-a", tenant("team-a", 31443, 31132))
    core, ns = cluster.core(), "tenant-team-a"
    SMALL = {"cpu": "10m", "memory": "64Mi"}  # noqa: N806 - a constant of this test

    def pod(name: str, *limits: str) -> dict:
        """A pod of one container per memory limit given, each asking for little (a limit alone
        would be its request too), or one container with LimitRange's defaults."""
        containers = [
            {"name": f"c{i}", "image": "x", "resources": {"requests": SMALL, "limits": {"memory": m}} if m else {}}
            for i, m in enumerate(limits or (None,))
        ]
        return {"metadata": {"name": name}, "spec": {"containers": containers}}

    def used(resource: str) -> str | None:
        return (core.read_namespaced_resource_quota(TEAM_ACCOUNT, ns).status.used or {}).get(resource)

    made = core.create_namespaced_pod(ns, pod("cp-0"), dry_run="All")
    resources = made.spec.containers[0].resources
    assert resources.requests == CONTAINER_LIMITS["defaultRequest"] and resources.limits == CONTAINER_LIMITS["default"]
    assert status(core.create_namespaced_pod, ns, pod("big", "64Gi"), dry_run="All") == 403
    wait_until(lambda: used("pods") == "0", timeout=60, what="the quota controller to take up team-a's quota")
    # memory limits: four pods at the 4 GiB cap hold 16 GiB of the 24; 12 GiB more is refused
    for i in range(4):
        core.create_namespaced_pod(ns, pod(f"big-{i}", "4Gi"))
    wait_until(lambda: used("limits.memory") == "16Gi", timeout=60, what="the quota to count memory limits")
    refused = ""
    try:
        core.create_namespaced_pod(ns, pod("more", "4Gi", "4Gi", "4Gi"), dry_run="All")
    except client.ApiException as exc:
        refused = f"{exc.status} {exc.body}"
    assert refused.startswith("403") and "exceeded quota" in refused and "limits.memory" in refused, refused
    # pods: up to the quota's count, then refused
    limit = int(CONTROL_PLANE_QUOTA["pods"])
    for i in range(4, limit):
        core.create_namespaced_pod(ns, pod(f"cp-{i}"))
    wait_until(lambda: used("pods") == str(limit), timeout=60, what="the quota controller to count team-a's pods")
    assert status(core.create_namespaced_pod, ns, pod("one-more"), dry_run="All") == 403
    for p in core.list_namespaced_pod(ns).items:
        core.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)


def b_schema() -> str:
    return datastore_schema("gpu-tenancy", "team-b", "team-b")
