"""Worker pools in the program's resource graph under mocks: a kwok pool (simulated nodes kept by
one KWOK per tenant on the lab's Docker network) and an external pool (the team's own machines,
joined with the command the stack outputs, real cards, no fake inventory and no release controller)."""

import copy
import json

import pytest
import yaml

from components.config import versions
from components.controllers.kwok import KWOK_RBAC_RULES
from components.domain.names import MACHINE_ID_ANNOTATION
from components.kube.bound_token import self_renewal_rules
from tests.support.harness import (
    JOIN_TOKEN,
    MACHINE_ID,
    ROOT,
    TENANT_CA_HASH,
    bound_token,
    deps,
    load_config_file,
    provider_name,
    run_program,
)

DEV = load_config_file(ROOT / "Pulumi.dev.yaml")
SIM_NODES = [f"gpu-lab-team-a-sim-{i}" for i in range(3)]
WORKER = "gpu-lab-team-a-worker-0"


def _with_team_a(**changes):
    config = copy.deepcopy(DEV)
    (team_a,) = [t for t in config["gpu-tenancy:tenants"] if t["name"] == "team-a"]
    team_a.update(changes)
    return config


KWOK_CONFIG = _with_team_a(
    pools=[
        {"name": "worker", "mode": "docker", "nodes": 1},
        {"name": "sim", "mode": "kwok", "nodes": 3},
    ],
    # a /24 per Node object, simulated ones included: a /16 holds 256
    podCidr="10.244.0.0/16",
)
EXTERNAL_CONFIG = _with_team_a(
    pools=[
        {"name": "worker", "mode": "docker", "nodes": 1},
        {"name": "gpus", "mode": "external", "nodes": 2, "joinTokenHours": 6},
    ],
    gpu={"model": "A100-80GB", "cardsPerNode": 8},
)


@pytest.fixture(scope="module")
def kwok():
    return run_program(KWOK_CONFIG)


@pytest.fixture(scope="module")
def ext():
    return run_program(EXTERNAL_CONFIG)


def names(rec, typ):
    return {r.name for r in rec.of_type(typ)}


def in_clear(value):
    """A value with every secret envelope removed: what the state would show in clear."""
    if isinstance(value, dict):
        if set(value) == {"secret"}:
            return None
        return {k: in_clear(v) for k, v in value.items()}
    if isinstance(value, list):
        return [in_clear(v) for v in value]
    return value


def nowhere_in_clear(rec, needle):
    leaks = [r.name for r in rec.registrations if needle in json.dumps(in_clear(r.inputs))]
    assert not leaks, f"{needle!r} in clear in {leaks}"
    assert needle not in json.dumps(in_clear(rec.stack_outputs))


KWOK_CONTROLLER = "gpu-tenancy:index:KwokController"
SIMULATED_NODES = "pulumi-python:dynamic/gpu-tenancy:SimulatedNodes"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
NODE_GPU_CAPACITY = "pulumi-python:dynamic/gpu-tenancy:NodeGpuCapacity"
RELEASE_CONTROLLER = "gpu-tenancy:index:ReleaseController"
BOOTSTRAP_TOKEN = "pulumi-python:dynamic/gpu-tenancy:BootstrapToken"
EXTERNAL_POOL = "gpu-tenancy:index:ExternalPool"


# -- (a) a kwok pool beside a docker pool ------------------------------------------------------
def test_one_kwok_controller_for_the_tenant_with_kwok_pools_only(kwok):
    assert names(kwok, KWOK_CONTROLLER) == {"team-a-kwok"}  # team-b has docker workers only
    assert names(kwok, SIMULATED_NODES) == {"team-a-sim"}
    assert not [r for r in kwok.registrations if r.name.startswith("team-b-kwok")]
    # nothing of KWOK's in the shared management cluster
    assert not [
        r for r in kwok.registrations if r.name.startswith("team-a-kwok") and provider_name(r) == "management-k8s"
    ]


def test_kwok_runs_on_the_lab_network_with_a_token_file_its_keeper_renews(kwok):
    c = kwok.named("team-a-kwok-container").inputs
    assert c["name"] == "gpu-lab-team-a-kwok" and c["image"] == "sha256:" + versions.KWOK_IMAGE.encode().hex()[:12]
    assert kwok.named("team-a-kwok-image").inputs["name"] == versions.KWOK_IMAGE
    assert c["restart"] == "unless-stopped" and c["mustRun"] is True and c["user"] == "65534:65534"
    assert c["networksAdvanced"] == [{"name": "gpu-lab"}]
    args = c["command"]
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in args
    assert "--manage-all-nodes=false" in args
    assert "--cidr=10.244.0.1/16" in args  # pod IPs from the tenant's own pod network
    assert "envs" not in c and not [a for a in args if "token" in a or "apiVersion" in a or "server:" in a]
    (kubeconfig_arg,) = [a for a in args if a.startswith("--kubeconfig=")]
    uploads = {u["file"]: u for u in c["uploads"]}
    kubeconfig = yaml.safe_load(uploads[kubeconfig_arg.split("=", 1)[1]]["content"]["secret"])
    # KWOK reads its token from the file the keeper renews: no token in its kubeconfig
    assert kubeconfig["users"][0]["user"] == {"tokenFile": "/var/lib/gpu-tenancy/token"}
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://172.30.0.2:31443"
    volume = {"volumeName": "gpu-lab-team-a-kwok-tokens", "containerPath": "/var/lib/gpu-tenancy"}
    assert c["volumes"] == [volume]
    keeper = kwok.named("team-a-kwok-token-keeper").inputs
    assert keeper["volumes"] == [volume] and keeper["name"] == "gpu-lab-team-a-kwok-token-keeper"
    assert keeper["entrypoints"] == ["python", "-m", "components.kube.bound_token"]
    assert keeper["wait"] is True and keeper["healthcheck"]["tests"][0] == "CMD"
    assert "team-a-kwok-token-keeper" in deps(kwok, "team-a-kwok-container")
    # one KWOK per tenant: the old container goes before its replacement starts
    assert kwok.named("team-a-kwok-container").delete_before_replace is True


def test_kwok_token_is_bound_for_its_own_least_privilege_account(kwok):
    keeper = kwok.named("team-a-kwok-token-keeper").inputs
    (upload,) = keeper["uploads"]
    assert upload["permissions"] == "0400" and upload["owner"] == "65534"
    kubeconfig = upload["content"]["secret"]  # a Pulumi secret as a whole
    assert bound_token("gpu-tenancy-kwok") in kubeconfig and "server: https://172.30.0.2:31443" in kubeconfig
    assert "client-key-data" not in kubeconfig and "super" not in kubeconfig  # not the admin's
    token = kwok.named("team-a-kwok-token")
    assert token.inputs["account"] == "gpu-tenancy-kwok" and token.inputs["seconds"] == 7 * 24 * 3600
    assert "team-a-kwok-token" in deps(kwok, "team-a-kwok-token-keeper")
    assert kwok.named("team-a-kwok-renewal-role").inputs["rules"] == self_renewal_rules("gpu-tenancy-kwok")
    nowhere_in_clear(kwok, bound_token("gpu-tenancy-kwok"))


def test_kwok_cluster_role_is_exactly_its_rules(kwok):
    role = kwok.named("team-a-kwok-role")
    assert role.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
    assert provider_name(role) == "team-a-cp-k8s"  # in the tenant, not the management cluster
    assert role.inputs["rules"] == [dict(r) for r in KWOK_RBAC_RULES]
    for rule in role.inputs["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    # KWOK keeps existing nodes: it never creates them (SimulatedNodes does)
    nodes = [r for r in role.inputs["rules"] if "nodes" in r["resources"]]
    assert all("create" not in r["verbs"] for r in nodes)
    binding = kwok.named("team-a-kwok-binding").inputs
    assert binding["roleRef"]["name"] == role.inputs["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-tenancy-kwok", "namespace": "kube-system"}]


def test_simulated_nodes_one_resource_per_pool(kwok):
    sim = kwok.named("team-a-sim")
    assert sim.type == SIMULATED_NODES
    assert sim.inputs["names"] == SIM_NODES
    assert sim.inputs["model"] == "A100-80GB"
    assert sim.inputs["cards_per_node"] == 1
    assert (sim.inputs["tenant"], sim.inputs["pool"]) == ("team-a", "sim")
    assert "secret" in sim.inputs["kubeconfig"]
    assert "team-a-cp-automation-token" in deps(kwok, "team-a-sim")
    assert "team-a-bootstrap-node-bootstrapper" in deps(kwok, "team-a-sim")


def test_simulated_nodes_carry_the_cards_and_the_docker_worker_none(kwok):
    # beside a kwok pool the docker worker runs the system pods: no fake inventory on it;
    # simulated nodes are written with their cards
    assert not [r for r in kwok.of_type(NODE_PATCH) if r.name.startswith("team-a-gpus-")]
    assert not [r for r in kwok.of_type(NODE_GPU_CAPACITY) if r.name.startswith("team-a-")]
    assert "gpu" not in kwok.named("team-a-worker-0-labels").inputs["metadata"]["labels"]


def test_hami_waits_for_simulated_nodes_and_kwok(kwok):
    hami = deps(kwok, "team-a-hami-release")
    assert {"team-a-sim", "team-a-kwok-container", "team-a-worker-0-settled"} <= hami
    assert {"team-a-worker-0-labels", "team-a-worker-0-membership"} <= deps(kwok, "team-a-worker-0-settled")
    assert "team-a-network-kindnet" in hami
    assert not {n for n in deps(kwok, "team-b-hami-release") if "kwok" in n or "sim" in n}


def test_registration_gate_expects_every_simulated_node(kwok):
    gate = kwok.named("team-a-hami-registration")
    assert gate.inputs["expected"] == {node: [f"GPU-team-a-{node}-0"] for node in SIM_NODES}  # one A100 per node
    assert "team-a-hami-release" in deps(kwok, "team-a-hami-registration")


def test_fake_cards_keep_the_mock_plugin_and_scheduler_on_docker_workers(kwok):
    for team in ("team-a", "team-b"):
        v = kwok.named(f"{team}-hami-release").inputs["values"]
        assert v["devicePlugin"]["enabled"] is False and v["mockDevicePlugin"] == {"enabled": True}
        assert v["scheduler"]["nodeSelector"] == {"gpu-tenancy/pool-mode": "docker"}
        assert v["scheduler"]["patch"] == {"enabled": False}  # no certgen job: the stack's certificate


def test_docker_worker_labelled_with_its_pool(kwok):
    labels = kwok.named("team-a-worker-0-labels")
    assert labels.type == NODE_PATCH and provider_name(labels) == "team-a-cp-k8s"
    assert labels.inputs["metadata"] == {
        "name": WORKER,
        "labels": {"gpu-tenancy/pool": "worker", "gpu-tenancy/pool-mode": "docker", "gpu-tenancy/tenant": "team-a"},
        # the machine that joined: a replaced worker's new Node is labelled again
        "annotations": {MACHINE_ID_ANNOTATION: MACHINE_ID},
    }
    assert "team-a-worker-0-membership" in deps(kwok, "team-a-worker-0-labels")


def test_kwok_tenant_keeps_its_release_controller(kwok):
    assert names(kwok, RELEASE_CONTROLLER) == {"team-a-releaser", "team-b-releaser"}
    assert kwok.named("team-a-releaser-container").inputs["name"] == "gpu-lab-team-a-releaser"
    assert "team-a-releaser-container" in deps(kwok, "team-a-default-shared-a100-deployment")
    assert kwok.stack_outputs["team-a"]["releaseController"]["container"] == "gpu-lab-team-a-releaser"


def test_kwok_stack_outputs(kwok):
    a = kwok.stack_outputs["team-a"]
    assert a["pools"] == {
        "worker": {"mode": "docker", "nodes": [WORKER]},
        "sim": {"mode": "kwok", "nodes": SIM_NODES},
    }
    assert a["gpuInventory"] == {
        "model": "NVIDIA A100 80GB",
        "cards": 3,
        "memoryMb": 3 * 81920,
        "coresPercent": 300,
        "pools": {"sim": {"model": "NVIDIA A100 80GB", "nodes": 3, "cardsPerNode": 1}},
    }
    assert kwok.stack_outputs["team-b"]["pools"] == {"worker": {"mode": "docker", "nodes": ["gpu-lab-team-b-worker-0"]}}


# -- (b) an external pool beside a docker pool -------------------------------------------------
def test_real_gpu_tenant_has_no_fake_inventory_and_no_release_controller(ext):
    assert names(ext, RELEASE_CONTROLLER) == {"team-b-releaser"}
    assert not [r for r in ext.registrations if r.name.startswith("team-a-releaser")]
    assert not [r for r in ext.of_type(NODE_PATCH) if r.name.startswith("team-a-gpus-")]
    assert not [r for r in ext.of_type(NODE_GPU_CAPACITY) if r.name.startswith("team-a-")]
    # team-b, fake cards, is unchanged
    assert "team-b-releaser-container" in {r.name for r in ext.registrations}
    assert {r.name for r in ext.of_type(NODE_GPU_CAPACITY)} == {"team-b-gpus-gpu-lab-team-b-worker-0-capacity"}
    assert not ext.of_type(KWOK_CONTROLLER) and not ext.of_type(SIMULATED_NODES)
    assert ext.stack_outputs["team-a"]["releaseController"] is None
    assert "team-a-releaser-container" not in deps(ext, "team-a-default-shared-a100-deployment")
    assert {"team-a-hami-webhook-probe", "team-a-hami-registration", "team-a-quota-default"} <= deps(
        ext, "team-a-default-shared-a100-deployment"
    )


def test_real_gpu_tenant_runs_nvidias_plugin(ext):
    a = ext.named("team-a-hami-release").inputs["values"]
    assert a["devicePlugin"]["enabled"] is True and a["mockDevicePlugin"] == {"enabled": False}
    assert a["scheduler"]["nodeSelector"] == {"gpu-tenancy/pool-mode": "docker"}
    assert a["scheduler"]["patch"] == {"enabled": False}
    b = ext.named("team-b-hami-release").inputs["values"]
    assert b["devicePlugin"]["enabled"] is False and b["mockDevicePlugin"] == {"enabled": True}
    # no fake card to wait for: the real plugin registers the machines' cards when they join
    assert ext.named("team-a-hami-registration").inputs["expected"] == {}


def test_docker_worker_of_a_real_gpu_tenant_carries_no_cards(ext):
    assert ext.named("team-a-worker-0-container").inputs["name"] == WORKER
    labels = ext.named("team-a-worker-0-labels")
    assert labels.inputs["metadata"]["labels"] == {
        "gpu-tenancy/pool": "worker",
        "gpu-tenancy/pool-mode": "docker",
        "gpu-tenancy/tenant": "team-a",
    }
    assert "team-a-worker-0-settled" in deps(ext, "team-a-hami-release")
    assert "team-a-worker-0-labels" in deps(ext, "team-a-worker-0-settled")


def test_external_pool_token_lives_join_token_hours(ext):
    (pool,) = ext.of_type(EXTERNAL_POOL)
    assert pool.name == "team-a-gpus"
    token = ext.named("team-a-gpus-token")
    assert token.type == BOOTSTRAP_TOKEN
    assert token.inputs["ttl_seconds"] == 6 * 3600 == 21600
    # judged against the pool's Nodes: renewed while machines are still to join, then revoked
    assert token.inputs["joins"] == {
        "labels": {
            "gpu": "on",
            "gpu-tenancy/pool": "gpus",
            "gpu-tenancy/pool-mode": "external",
            "gpu-tenancy/tenant": "team-a",
        },
        "expected": 2,
    }
    # a docker worker's token expects its own Node (renewed until it joins; revoked by its membership)
    assert ext.named("team-a-worker-0-token").inputs["joins"] == {
        "labels": {"kubernetes.io/hostname": "gpu-lab-team-a-worker-0"},
        "expected": 1,
        "keep_when_unknown": True,
    }
    assert len(token.inputs["token_id"]) == 6
    assert token.inputs["token_id"] != ext.named("team-a-worker-0-token").inputs["token_id"]
    assert "secret" in token.inputs["kubeconfig"]
    assert "team-a-bootstrap-node-bootstrapper" in deps(ext, "team-a-gpus-token")


def test_external_join_output_is_secret_with_the_ca_pinned(ext):
    pools = ext.stack_outputs["team-a"]["pools"]
    assert pools["worker"] == {"mode": "docker", "nodes": [WORKER]}
    gpus = pools["gpus"]
    assert gpus["mode"] == "external"
    join = gpus["join"]
    assert set(join) == {"secret"}, "the join carries a bootstrap token: a secret output"
    join = join["secret"]
    assert set(join) == {"configuration", "labels", "expires", "status"}, "the configuration form only"
    assert JOIN_TOKEN not in join["labels"] + join["status"] and "kubeadm join" not in json.dumps(join)
    assert join["status"].startswith("open until ") and "for 2 machines" in join["status"]
    config = yaml.safe_load(join["configuration"])
    assert config["kind"] == "JoinConfiguration"
    discovery = config["discovery"]["bootstrapToken"]
    assert discovery == {"apiServerEndpoint": "172.30.0.2:31443", "token": JOIN_TOKEN, "caCertHashes": [TENANT_CA_HASH]}
    (node_labels,) = [a["value"] for a in config["nodeRegistration"]["kubeletExtraArgs"] if a["name"] == "node-labels"]
    labels = dict(kv.split("=", 1) for kv in node_labels.split(","))
    assert labels == {
        "gpu": "on",
        "gpu-tenancy/pool": "gpus",
        "gpu-tenancy/pool-mode": "external",
        "gpu-tenancy/tenant": "team-a",
    }
    assert join["labels"] == node_labels
    nowhere_in_clear(ext, JOIN_TOKEN)


def test_external_stack_outputs(ext):
    a = ext.stack_outputs["team-a"]
    # the machines' cards: 2 nodes x 8 A100 (docker workers carry none)
    assert a["gpuInventory"] == {
        "model": "NVIDIA A100 80GB",
        "cards": 16,
        "memoryMb": 16 * 81920,
        "coresPercent": 1600,
        "pools": {"gpus": {"model": "NVIDIA A100 80GB", "nodes": 2, "cardsPerNode": 8}},
    }


def test_lab_kwok_image_is_the_version_the_tests_build():
    """The lab's KWOK image and the kwok binary the integration tier runs are one version."""
    from components.config import versions

    built = dict(
        line.split("=", 1) for line in (ROOT / "tools" / "versions.env").read_text().splitlines() if "=" in line
    )
    assert built["KWOK_VERSION"] == versions.KWOK_VERSION
    assert versions.KWOK_IMAGE.endswith(f":v{built['KWOK_VERSION']}")


@pytest.mark.parametrize("stack", ["kwok", "ext"])
def test_a_container_with_an_owned_upload_names_its_user_as_a_bare_uid(stack, request):
    """An upload with an owner makes Docker resolve the container's user in the host's passwd
    database (getent): `uid:gid` is no entry there and the upload fails at create, so each such
    container names its user as the bare uid the upload is owned by."""
    owned = [
        (c.name, c.inputs.get("user"), u["owner"])
        for c in request.getfixturevalue(stack).of_type("docker:index/container:Container")
        for u in c.inputs.get("uploads", [])
        if u.get("owner") or u.get("group")
    ]
    assert owned, "no container with an owned upload: the check would prove nothing"
    for name, user, owner in owned:
        assert user == owner and user.isdigit(), f"{name}: user {user!r}, upload owned by {owner!r}"


def test_every_controller_container_on_the_lab_host_has_a_memory_cap_and_no_swap_beyond_it(kwok, ext):
    """One tenant's controller (its release controller, KWOK, a token keeper) cannot take the
    host's memory from another tenant or from the management cluster."""
    from components.tenant import kwok_controller, release_controller

    caps = {}
    for rec in (kwok, ext):
        for c in rec.of_type("docker:index/container:Container"):
            if c.inputs.get("privileged"):  # a node: its kubelet's and containerd's, sized apart
                continue
            memory = c.inputs.get("memory")
            assert isinstance(memory, int | float) and memory > 0, f"{c.name}: no memory cap"
            assert c.inputs.get("memorySwap") == memory, f"{c.name}: swap beyond its cap"
            caps[c.name] = memory
    assert caps["team-a-kwok-container"] == kwok_controller.MEMORY_MIB
    assert caps["team-a-kwok-token-keeper"] == kwok_controller.KEEPER_MEMORY_MIB
    assert caps["team-a-releaser-container"] == release_controller.MEMORY_MIB
    assert len(caps) >= 3, sorted(caps)
