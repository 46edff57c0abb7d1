"""The real-Kamaji tier: the project's TenantControlPlanes, built by the program's own functions
from the dev stack's config, reconciled by Kamaji's real manager on a real kube-apiserver with a
TLS etcd DataStore. Checked: Kamaji's webhooks accept them; Kamaji makes the Deployment, a
NodePort Service with exactly the config's ports, the certificates and the admin kubeconfig
Secret the program reads; the control plane's arguments carry the config; the datastore user
and schema are the project's; the project's version rules match Kamaji's webhook case by case;
deleting a tenant completes Kamaji's finalizers and removes what it made, datastore included.
Skipped, saying why, without a Kamaji manager binary (KAMAJI_BIN). What stays unverified here:
Kamaji's addons and kubelet configuration (it installs them through in-cluster DNS), a running
control-plane pod (no kubelet), hence a TCP that reports Ready."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from kubernetes import client

from components.config.load import load_stack_file, load_tenants
from components.config.model import TeamSlot
from components.config.tenant_version import create_refusal, step_refusal
from components.domain.names import (
    TEAM_ACCOUNT,
    admin_kubeconfig_secret,
    datastore_schema,
    tenant_namespace,
)
from components.kube.client import api_client, cluster_ca, token_kubeconfig
from components.kube.waiting import TimedOut, wait_until
from components.platform.team_access import (
    CONTAINER_LIMITS,
    CONTROL_PLANE_QUOTA,
    TCP_COUNT,
    control_plane_policy,
    control_plane_rules,
)
from components.tenant.control_plane import control_plane_metadata, control_plane_spec
from tests.support.cluster import start_cluster
from tests.support.real_kamaji import DATASTORE, GROUP, SKIP_REASON, VERSION, RealKamaji, binary
from tests.support.tools import ROOT, require

pytestmark = pytest.mark.integration
CONFIG = load_stack_file(ROOT / "Pulumi.dev.yaml")
PROJECT, STACK = "gpu-tenancy", "dev"
ADDRESS = CONFIG.cluster.management_ip
CLUSTER_CONFIG = {"name": CONFIG.cluster.name, "subnet": str(CONFIG.cluster.subnet), "managementIp": str(ADDRESS)}
# Kamaji's Secrets for a TCP (reference/kamaji.md section 6), certificates and kubeconfigs.
SECRETS = (
    "ca",
    "api-server-certificate",
    "api-server-kubelet-client-certificate",
    "front-proxy-ca-certificate",
    "front-proxy-client-certificate",
    "sa-certificate",
    "datastore-certificate",
    "datastore-config",
    "admin-kubeconfig",
    "controller-manager-kubeconfig",
    "scheduler-kubeconfig",
    "konnectivity-certificate",
)


@pytest.fixture(scope="module")
def kamaji(tools):
    path = binary()
    if path is None:
        pytest.skip(SKIP_REASON)
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    cluster = start_cluster(tools)
    # Deployments make pods (no scheduler: they stay Pending) under a team's quota and limits.
    cluster.start_controller_manager(
        ["garbagecollector", "namespace", "serviceaccount", "resourcequota", "deployment", "replicaset"]
    )
    try:
        k = RealKamaji(cluster, path).start()
        for t in CONFIG.tenants:  # as the platform makes them, before any TCP
            cluster.core().create_namespace({"metadata": {"name": tenant_namespace(t.name)}})
        yield cluster, k
    finally:
        cluster.stop()


def tcp_body(t, version: str | None = None, name: str | None = None) -> dict:
    """The TenantControlPlane exactly as the program builds it (ControlPlane's functions)."""
    schema = datastore_schema(PROJECT, STACK, t.name)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantControlPlane",
        "metadata": control_plane_metadata(t, tenant_namespace(t.name)),
        "spec": control_plane_spec(t, ADDRESS, DATASTORE, schema),
    }
    if version:
        body["spec"]["kubernetes"]["version"] = version
    if name:
        body["metadata"]["name"] = name
    return body


def custom(cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


def settle(check, timeout: float = 90, what: str = "Kamaji"):
    try:
        return wait_until(check, timeout=timeout, interval=0.5, what=what)
    except TimedOut as exc:
        raise AssertionError(str(exc)) from None


def args_of(container: client.V1Container) -> set[str]:
    return set(container.command or []) | set(container.args or [])


def test_the_dev_tenants_are_accepted_and_reconciled(kamaji):
    cluster, k = kamaji
    for t in CONFIG.tenants:
        created(cluster, t)

    for t in CONFIG.tenants:
        reconciled(cluster, k, t)


def created(cluster, t) -> None:
    """The tenant's TCP, unless an earlier test made it."""
    api, ns = custom(cluster), tenant_namespace(t.name)
    if _get(api.get_namespaced_custom_object, GROUP, VERSION, ns, "tenantcontrolplanes", t.name) is None:
        api.create_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", tcp_body(t))


def reconciled(cluster, k: RealKamaji, t) -> None:
    """What Kamaji made for tenant `t` is what the program and its config say."""
    core, apps, api = cluster.core(), client.AppsV1Api(cluster.api_client()), custom(cluster)
    ns, schema = tenant_namespace(t.name), datastore_schema(PROJECT, STACK, t.name)

    def kubeconfigs():
        found = _get(core.read_namespaced_secret, admin_kubeconfig_secret(t.name), ns)
        # what ControlPlane reads (Kamaji writes the keys over a few reconciles)
        return found if found and {"admin.conf", "super-admin.conf"} <= set(found.data or {}) else None

    secret = settle(kubeconfigs, what="the admin kubeconfig Secret with admin.conf and super-admin.conf")
    admin = yaml.safe_load(base64.b64decode(secret.data["admin.conf"]))
    assert admin["clusters"][0]["cluster"]["server"] == f"https://{ADDRESS}:{t.api_port}"
    wanted = {f"{t.name}-{s}" for s in SECRETS}
    settle(
        lambda: wanted <= {s.metadata.name for s in core.list_namespaced_secret(ns).items},
        what=f"Kamaji's Secrets {sorted(wanted)}",
    )

    def exposed():  # the konnectivity port is added once Kamaji reconciles Konnectivity
        found = _get(core.read_namespaced_service, t.name, ns)
        return found if found and len(found.spec.ports or []) >= 2 else None

    svc = settle(exposed, what="the Service with both ports")
    assert svc.spec.type == "NodePort"
    assert {(p.port, p.node_port) for p in svc.spec.ports} == {
        (t.api_port, t.api_port),
        (t.konnectivity_port, t.konnectivity_port),
    }

    def deployed():
        found = _get(apps.read_namespaced_deployment, t.name, ns)
        names = {c.name for c in found.spec.template.spec.containers} if found else set()
        return found if "konnectivity-server" in names else None

    deploy = settle(deployed, what="the Deployment with its konnectivity-server")
    assert deploy.spec.replicas == 1
    containers = {c.name: c for c in deploy.spec.template.spec.containers}
    assert {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "konnectivity-server"} <= set(containers)
    apiserver = args_of(containers["kube-apiserver"])
    for flag in (
        f"--advertise-address={ADDRESS}",
        f"--secure-port={t.api_port}",
        f"--service-cluster-ip-range={t.service_cidr}",
        f"--etcd-prefix=/{schema}",
    ):
        assert flag in apiserver, (flag, sorted(apiserver))
    assert any(a.startswith("--egress-selector-config-file=") for a in apiserver)
    (plugins,) = [a.split("=", 1)[1] for a in apiserver if a.startswith("--enable-admission-plugins=")]
    assert "NodeRestriction" in plugins.split(","), plugins
    manager = args_of(containers["kube-controller-manager"])
    assert f"--cluster-cidr={t.pod_cidr}" in manager and f"--service-cluster-ip-range={t.service_cidr}" in manager
    konnectivity = args_of(containers["konnectivity-server"])
    assert any(str(t.konnectivity_port) in a for a in konnectivity), sorted(konnectivity)

    tcp = settle(lambda: _setup(api, ns, t.name), what="datastore setup")
    storage = tcp["status"]["storage"]
    assert storage["dataStoreName"] == DATASTORE and storage["setup"]["schema"] == schema
    assert schema in k.etcd.users() and schema in k.etcd.roles()


def test_kamajis_defaults_are_ones_the_project_can_leave_to_it(kamaji):
    """What Kamaji's mutating webhook fills in on the program's spec, and why the program does
    not set it itself (docs/tenants.md, "Tenants on Kamaji")."""
    cluster, _ = kamaji
    t = CONFIG.tenants[0]
    created(cluster, t)
    tcp = custom(cluster).get_namespaced_custom_object(
        GROUP, VERSION, tenant_namespace(t.name), "tenantcontrolplanes", t.name
    )
    net = tcp["spec"]["networkProfile"]
    # The deprecated singular fields are copies of the lists the program sets: no conflict.
    assert net.get("podCidr", t.pod_cidr) == t.pod_cidr and net.get("serviceCidr", t.service_cidr) == t.service_cidr
    assert net["podCidrs"] == [t.pod_cidr] and net["serviceCidrs"] == [t.service_cidr]
    assert net["dnsServiceIPs"] == [t.dns_service_ip] and net.get("clusterDomain", "cluster.local") == "cluster.local"
    registry = tcp["spec"]["controlPlane"]["deployment"].get("registrySettings", {})
    assert registry.get("registry", "registry.k8s.io") == "registry.k8s.io"
    admission = tcp["spec"]["kubernetes"].get("admissionControllers", [])
    # The budget needs the ResourceQuota admission and HAMi needs the webhooks.
    assert {"ResourceQuota", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"} <= set(admission), admission


# (old, new): old None = a new TCP. The project's rule and Kamaji's webhook must agree on each.
VERSION_CASES = [
    (None, "v1.37.0"),
    (None, "v1.36.2"),
    ("v1.35.1", "v1.36.0"),
    ("v1.35.7", "v1.35.1"),
    ("v1.36.0", "v1.35.1"),
    ("v1.34.2", "v1.36.0"),
    ("v1.35.1", "v1.37.0"),
]


@pytest.mark.parametrize(("old", "new"), VERSION_CASES)
def test_the_projects_version_rules_are_kamajis(kamaji, old, new):
    cluster, _ = kamaji
    t = CONFIG.tenants[0]
    ns, name = tenant_namespace(t.name), f"v-{(old or 'new').replace('.', '-')}-{new.replace('.', '-')}"
    api = custom(cluster)
    body = tcp_body(t, version=old or new, name=name.lower())
    body["spec"]["dataStoreSchema"] = body["spec"]["dataStoreUsername"] = name.replace("-", "_")
    mine = create_refusal(new) if old is None else step_refusal(old, new)
    try:
        api.create_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", body)
        if old is not None:
            patch = {"spec": {"kubernetes": {"version": new}}}
            api.patch_namespaced_custom_object(
                GROUP, VERSION, ns, "tenantcontrolplanes", body["metadata"]["name"], patch
            )
        theirs = None
    except client.ApiException as exc:
        assert exc.status in (400, 403, 422), exc.body
        theirs = exc.body
    finally:  # refused at creation: nothing to delete
        _get(api.delete_namespaced_custom_object, GROUP, VERSION, ns, "tenantcontrolplanes", body["metadata"]["name"])
    assert (mine is None) == (theirs is None), (mine, theirs)
    if mine:
        assert mine in theirs, (mine, theirs)


def test_a_missing_datastore_is_refused_by_kamaji(kamaji):
    cluster, _ = kamaji
    t = CONFIG.tenants[0]
    body = tcp_body(t, name="no-store")
    body["spec"]["dataStore"] = "missing"
    with pytest.raises(client.ApiException) as refused:
        custom(cluster).create_namespaced_custom_object(
            GROUP, VERSION, tenant_namespace(t.name), "tenantcontrolplanes", body
        )
    assert "missing DataStore does not exist" in refused.value.body


def test_deleting_a_tenant_removes_what_kamaji_made_and_its_datastore(kamaji):
    cluster, k = kamaji
    core, apps, api = cluster.core(), client.AppsV1Api(cluster.api_client()), custom(cluster)
    t = CONFIG.tenants[-1]
    ns, schema = tenant_namespace(t.name), datastore_schema(PROJECT, STACK, t.name)
    created(cluster, t)
    settle(lambda: _setup(api, ns, t.name), what="datastore setup")
    assert k.etcd.keys_under(f"/{schema}/") >= 0
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", t.name)
    settle(
        lambda: _get(api.get_namespaced_custom_object, GROUP, VERSION, ns, "tenantcontrolplanes", t.name) is None,
        what="the TCP's finalizers",
    )
    settle(lambda: _get(apps.read_namespaced_deployment, t.name, ns) is None, what="the Deployment to go")
    settle(lambda: _get(core.read_namespaced_service, t.name, ns) is None, what="the Service to go")
    settle(
        lambda: not [s for s in core.list_namespaced_secret(ns).items if s.metadata.name.startswith(f"{t.name}-")],
        what="Kamaji's Secrets to go",
    )
    settle(lambda: schema not in k.etcd.users() and schema not in k.etcd.roles(), what="the datastore user and role")
    assert k.etcd.keys_under(f"/{schema}/") == 0


def _get(call, *args):
    try:
        return call(*args)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _setup(api: client.CustomObjectsApi, ns: str, name: str):
    tcp = api.get_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", name)
    setup = ((tcp.get("status") or {}).get("storage") or {}).get("setup") or {}
    return tcp if setup.get("schema") else None


TEAM = {"name": "team-x", "apiPort": 31445, "konnectivityPort": 31134}


def test_a_teams_control_plane_passes_its_policy_through_kamajis_webhooks(kamaji):
    """A team's TenantControlPlane under what the platform makes for the team (TeamAccess's
    policy, quota, limits and Role, applied here as TeamAccess would), created with the team's own
    token: Kamaji's defaults do not trip the allow-list, Kamaji reconciles it (its own updates are
    not the team's to be judged), a refused field is still refused after Kamaji's mutation, the
    Deployment's pods are admitted under the quota with LimitRange's requests, and the team's
    delete completes Kamaji's finalizers."""
    cluster, _ = kamaji
    core, apps, api = cluster.core(), client.AppsV1Api(cluster.api_client()), custom(cluster)
    slot = TeamSlot(name=TEAM["name"], api_port=TEAM["apiPort"], konnectivity_port=TEAM["konnectivityPort"])
    ns = tenant_namespace(slot.name)
    core.create_namespace({"metadata": {"name": ns}})
    core.create_namespaced_service_account(ns, {"metadata": {"name": TEAM_ACCOUNT}})
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    rbac.create_namespaced_role(ns, {"metadata": {"name": TEAM_ACCOUNT}, "rules": control_plane_rules(slot.name)})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": TEAM_ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TEAM_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": TEAM_ACCOUNT, "namespace": ns}],
        },
    )
    core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": TEAM_ACCOUNT}, "spec": {"hard": CONTROL_PLANE_QUOTA}}
    )
    core.create_namespaced_limit_range(ns, {"metadata": {"name": TEAM_ACCOUNT}, "spec": {"limits": [CONTAINER_LIMITS]}})
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    policy = f"gpu-tenancy-team-{slot.name}"
    admission.create_validating_admission_policy(
        {"metadata": {"name": policy}, "spec": control_plane_policy(slot, DATASTORE, PROJECT)}
    )
    admission.create_validating_admission_policy_binding(
        {
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
            },
        }
    )
    settle(
        lambda: (core.read_namespaced_resource_quota(TEAM_ACCOUNT, ns).status.used or {}).get(TCP_COUNT) == "0",
        timeout=120,
        what="the quota controller to count control planes",
    )
    token = core.create_namespaced_service_account_token(
        TEAM_ACCOUNT, ns, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    as_team = client.CustomObjectsApi(
        api_client(token_kubeconfig(f"https://127.0.0.1:{cluster.port}", cluster_ca(cluster.kubeconfig_text), token))
    )
    (t,) = load_tenants(
        PROJECT,
        [
            {
                **TEAM,
                "gpu": {"model": "L4", "cardsPerNode": 1},
                "quota": {"gpus": 1, "gpumemMb": 23034, "gpucoresPercent": 100},
            }
        ],
        CLUSTER_CONFIG,
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantControlPlane",
        "metadata": control_plane_metadata(t, ns),
        "spec": control_plane_spec(t, ADDRESS, DATASTORE, datastore_schema(PROJECT, t.name, t.name)),
    }
    refused = json.loads(json.dumps(body))
    refused["spec"]["controlPlane"]["deployment"]["registrySettings"] = {"registry": "evil.example"}

    def refusal() -> str | None:  # the API server loads a new policy binding within a second or so
        try:
            as_team.create_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", refused, dry_run="All")
        except client.ApiException as exc:
            return exc.body
        return None

    assert "registrySettings.registry is not allowed" in settle(refusal, what="the team's policy to be in force")
    as_team.create_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", body)
    settle(lambda: _setup(api, ns, t.name), what="datastore setup of the team's control plane")
    pods = settle(
        lambda: core.list_namespaced_pod(ns).items or None, timeout=120, what="the control plane's pods (quota, limits)"
    )
    for container in pods[0].spec.containers:
        assert container.resources.requests["cpu"] == CONTAINER_LIMITS["defaultRequest"]["cpu"], container.name
    # an update by the team is judged again; its own fields pass
    as_team.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "tenantcontrolplanes", t.name, {"spec": {"writePermissions": {"blockCreation": False}}}
    )
    as_team.delete_namespaced_custom_object(GROUP, VERSION, ns, "tenantcontrolplanes", t.name)
    settle(
        lambda: _get(api.get_namespaced_custom_object, GROUP, VERSION, ns, "tenantcontrolplanes", t.name) is None,
        what="Kamaji's finalizers on the team's control plane",
    )
    settle(lambda: _get(apps.read_namespaced_deployment, t.name, ns) is None, what="the Deployment to go")
