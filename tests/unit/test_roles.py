"""The three ways to run the program: lab (tested in test_graph), platform, team."""

import pytest

from components.config.model import ConfigError, load_stack_config
from tests.unit.harness import ROOT, TENANT_SUPER, ProgramMocks, load_config_file, run_program

PLATFORM = load_config_file(ROOT / "Pulumi.platform.yaml")
TEAM_A = load_config_file(ROOT / "Pulumi.team-a.yaml")
TEAM_B = load_config_file(ROOT / "Pulumi.team-b.yaml")


def raw(config):
    return {k.split(":", 1)[1]: v for k, v in config.items()}


@pytest.fixture
def platform_outputs():
    ProgramMocks.stack_outputs = {
        "platform": {
            "managementKubeconfig": TENANT_SUPER,
            "network": "gpu-platform",
            "lab": "gpu-platform",
            "address": "172.31.0.2",
            "datastore": "default",
            "teams": [
                {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132},
                {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133},
            ],
        }
    }
    yield ProgramMocks.stack_outputs
    ProgramMocks.stack_outputs = {}


def test_platform_stack_builds_cluster_and_kamaji_and_exports_for_teams():
    rec = run_program(PLATFORM, stack="platform")
    types = {r.type for r in rec.registrations}
    assert "gpu-tenancy:index:ManagementCluster" in types and "gpu-tenancy:index:KamajiPlatform" in types
    assert "gpu-tenancy:index:GpuTenant" not in types
    out = rec.stack_outputs["platform"]
    assert out["network"] == "gpu-platform" and out["lab"] == "gpu-platform" and out["address"] == "172.31.0.2"
    assert "secret" in out["managementKubeconfig"]
    assert out["teams"] == [
        {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132},
        {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133},
    ]


@pytest.mark.parametrize(("config", "team", "stack"), [(TEAM_A, "team-a", "team-a"), (TEAM_B, "team-b", "team-b")])
def test_team_stack_creates_only_its_tenant_on_the_platform(platform_outputs, config, team, stack):
    rec = run_program(config, stack=stack)
    types = {r.type for r in rec.registrations}
    assert "gpu-tenancy:index:ManagementCluster" not in types and "gpu-tenancy:index:KamajiPlatform" not in types
    assert not [r for r in rec.registrations if r.name.startswith("management-")]
    (ref,) = rec.of_type("pulumi:pulumi:StackReference")
    assert ref.name == "organization/gpu-tenancy/platform"
    assert [r.name for r in rec.of_type("gpu-tenancy:index:GpuTenant")] == [team]
    tcp = rec.named(f"{team}-cp-tcp")
    assert tcp.provider.split("::")[-2] == "platform-k8s"
    assert rec.named("platform-k8s").inputs["kubeconfig"] == {"secret": TENANT_SUPER}
    worker = rec.named(f"{team}-worker-0-container").inputs
    assert worker["name"] == f"gpu-platform-{team}-worker-0"
    assert worker["networksAdvanced"][0]["name"] == "gpu-platform"
    assert tcp.inputs["spec"]["dataStoreSchema"] == f"gpu_tenancy_{stack}_{team}".replace("-", "_")


def test_two_team_stacks_cannot_collide():
    a, b = load_stack_config("gpu-tenancy", raw(TEAM_A)), load_stack_config("gpu-tenancy", raw(TEAM_B))
    ta, tb = a.tenants[0], b.tenants[0]
    assert ta.name != tb.name
    assert {ta.api_port, ta.konnectivity_port}.isdisjoint({tb.api_port, tb.konnectivity_port})
    platform = load_stack_config("gpu-tenancy", raw(PLATFORM))
    assert {(s.name, s.api_port, s.konnectivity_port) for s in platform.teams} == {
        (ta.name, ta.api_port, ta.konnectivity_port),
        (tb.name, tb.api_port, tb.konnectivity_port),
    }


def test_team_stack_that_does_not_match_the_registry_stops(platform_outputs):
    config = {**TEAM_A, "gpu-tenancy:tenants": [dict(TEAM_A["gpu-tenancy:tenants"][0], apiPort=31444)]}
    with pytest.raises(Exception, match="reserved 31443/31132 for it"):
        run_program(config, stack="team-a")


@pytest.mark.parametrize(
    ("change", "key", "text"),
    [
        ({"gpu-tenancy:role": "cluster"}, "gpu-tenancy:role", "must be one of lab, platform, team"),
        ({"gpu-tenancy:platformStack": "platform"}, "gpu-tenancy:platformStack", "<org>/<project>/<stack>"),
    ],
)
def test_bad_team_config(change, key, text):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw({**TEAM_A, **change}))
    assert [k for k, _ in err.value.problems] == [key]
    assert text in err.value.problems[0][1]


def test_platform_registry_rejects_duplicates_and_tenants():
    config = {**PLATFORM, "gpu-tenancy:teams": PLATFORM["gpu-tenancy:teams"] * 2}
    with pytest.raises(ConfigError, match="duplicate team name 'team-a'"):
        load_stack_config("gpu-tenancy", raw(config))
    with pytest.raises(ConfigError, match="a platform stack has no tenants"):
        load_stack_config("gpu-tenancy", raw({**PLATFORM, "gpu-tenancy:tenants": TEAM_A["gpu-tenancy:tenants"]}))
