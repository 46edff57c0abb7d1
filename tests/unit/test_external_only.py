"""A tenant of the team's own machines only (every pool `external`): accepted by the config, built
with no Docker resource and no controllers' image (a team stack of it needs no Docker engine), HAMi's
scheduler placed on those machines, and HAMi waiting behind a gate that says plainly when no machine
has joined yet."""

import copy
import json
import time

import pytest

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.domain.names import POOL_LABEL, POOL_MODE_LABEL, TENANT_LABEL
from components.kube import platform_record
from components.lifecycle.machines_joined import NoMachineJoinedError, NoMachineReadyError, wait_for_machine
from tests.support.fake_kube import FakeCore
from tests.support.harness import ROOT, deps, load_config_file, reaches, run_program
from tests.support.team_grant import SECRET, record, team_config

TEAM_B = load_config_file(ROOT / "Pulumi.team-b.yaml")
DEV = load_config_file(ROOT / "Pulumi.dev.yaml")
MACHINES = [{"name": "gpus", "mode": "external", "nodes": 2}]


def own_machines_only(config: dict, tenant: str) -> dict:
    config = copy.deepcopy(config)
    (t,) = [t for t in config["gpu-tenancy:tenants"] if t["name"] == tenant]
    t["pools"] = MACHINES
    return config


@pytest.fixture
def published(monkeypatch):
    theirs = record("team-b", 31444, 31133)
    monkeypatch.setattr(platform_record, "read_platform_record", lambda *_: theirs)


@pytest.fixture
def team_b(published):
    return run_program(team_config(own_machines_only(TEAM_B, "team-b")), stack="team-b", secret_keys=SECRET)


def test_a_team_stack_of_its_own_machines_makes_nothing_in_docker(team_b):
    types = {r.type for r in team_b.registrations}
    assert not [t for t in types if t.startswith(("docker:", "command:"))], sorted(types)
    assert not [r for r in team_b.registrations if "releaser" in r.name or "kwok" in r.name]
    assert not team_b.of_type("gpu-tenancy:index:TenantNetwork")
    # what it does make: its control plane on the platform, the join, HAMi with the real plugin
    assert team_b.named("team-b-cp-tcp").provider.split("::")[-2] == "platform-k8s"
    join = team_b.stack_outputs["team-b"]["pools"]["gpus"]
    assert join["mode"] == "external" and join["machines"] == 2
    values = team_b.named("team-b-hami-release").inputs["values"]
    assert values["devicePlugin"]["enabled"] is True and values["mockDevicePlugin"] == {"enabled": False}


def test_hamis_scheduler_runs_on_the_teams_machines(team_b):
    values = team_b.named("team-b-hami-release").inputs["values"]
    assert values["scheduler"]["nodeSelector"] == {POOL_MODE_LABEL: "external"}


def test_hami_waits_for_a_machine_of_the_team(team_b):
    gate = team_b.named("team-b-machines")
    assert gate.inputs["tenant"] == "team-b" and gate.inputs["pools"] == {"gpus": 2}
    assert "team-b-gpus-token" in deps(team_b, "team-b-machines")  # after the join exists
    assert reaches(team_b, "team-b-hami-release", "team-b-machines")
    assert reaches(team_b, "team-b-inference-inference-l4-pod", "team-b-machines")


def test_a_tenant_with_docker_workers_has_no_such_gate():
    rec = run_program(DEV)
    assert not [r for r in rec.registrations if r.name.endswith("-machines")]
    values = rec.named("team-a-hami-release").inputs["values"]
    assert values["scheduler"]["nodeSelector"] == {POOL_MODE_LABEL: "docker"}


def test_a_lab_builds_the_controllers_image_only_for_tenants_that_run_it():
    both = own_machines_only(own_machines_only(DEV, "team-a"), "team-b")
    for config, built in ((DEV, True), (own_machines_only(DEV, "team-a"), True), (both, False)):
        rec = run_program(config)
        assert bool(rec.of_type("gpu-tenancy:index:ReleaseControllerImage")) is built


@pytest.mark.parametrize(
    ("pools", "said"),
    [
        ([{"name": "sim", "mode": "kwok", "nodes": 3}], "needs a docker or an external pool"),
        ([], "needs at least one pool"),
        (
            [{"name": "sim", "mode": "kwok", "nodes": 3}, *MACHINES],
            "mixes kwok (fake cards, HAMi's mock plugin) and external",
        ),
    ],
)
def test_pools_that_cannot_run_the_system_pods_are_refused_at_their_key(pools, said):
    config = json.loads(json.dumps(team_config(TEAM_B)))
    config["gpu-tenancy:tenants"][0]["pools"] = pools
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", {k.split(":", 1)[1]: v for k, v in config.items()}, True, True)
    assert [k for k, _ in err.value.problems] == ["gpu-tenancy:tenants[0].pools"]
    assert said in err.value.problems[0][1]


def test_a_tenant_of_its_own_machines_is_accepted():
    config = team_config(own_machines_only(TEAM_B, "team-b"))
    cfg = load_stack_config("gpu-tenancy", {k.split(":", 1)[1]: v for k, v in config.items()}, True, True)
    (t,) = cfg.tenants
    assert t.system_pool_mode == "external" and not t.runs_controllers and t.real_gpus


# -- the gate's back-end ---------------------------------------------------------------------------
def machine(core: FakeCore, name: str, ready: str, reason: str = "", message: str = "", tenant: str = "team-b"):
    core.add_node(name, {TENANT_LABEL: tenant, POOL_LABEL: "gpus", POOL_MODE_LABEL: "external"})
    condition = {"type": "Ready", "status": ready, "reason": reason, "message": message}
    core.nodes[name]["status"] = {"conditions": [condition]}


def test_no_machine_yet_is_said_at_once_with_what_to_do():
    core = FakeCore()
    machine(core, "other-teams", "True", tenant="team-a")  # another tenant's machine is not one
    core.add_node("gpu-lab-team-b-worker-0", {TENANT_LABEL: "team-b", POOL_MODE_LABEL: "docker"})
    started = time.monotonic()
    with pytest.raises(NoMachineJoinedError) as err:
        wait_for_machine(core, "team-b", {"gpus": 2}, timeout=300)
    assert time.monotonic() - started < 5  # a state, not a timeout
    said = str(err.value)
    assert "no machine of its own has joined yet (pool gpus: 0 of 2)" in said
    assert "pulumi stack output team-b --show-secrets" in said and "pulumi up` again" in said


def test_machines_that_never_become_ready_are_named_with_their_kubelets_reason():
    core = FakeCore()
    machine(core, "gpu-node-1", "False", "KubeletNotReady", "container runtime network not ready: cni not initialized")
    with pytest.raises(NoMachineReadyError) as err:
        wait_for_machine(core, "team-b", {"gpus": 2}, timeout=0.5, interval=0.1)
    said = str(err.value)
    assert "gpu-node-1 (pool gpus): KubeletNotReady: container runtime network not ready" in said


def test_one_ready_machine_opens_the_gate():
    core = FakeCore()
    machine(core, "gpu-node-1", "False", "KubeletNotReady")
    machine(core, "gpu-node-2", "True")
    assert wait_for_machine(core, "team-b", {"gpus": 2}, timeout=5, interval=0.1) == ["gpu-node-2"]
