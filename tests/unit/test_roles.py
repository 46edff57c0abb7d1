"""The three ways to run the program: lab (tested in test_graph), platform, team."""

import base64
import json

import pytest

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.kube.client import cluster_ca, token_kubeconfig
from components.platform.team_access import control_plane_rules
from tests.support.harness import ROOT, TENANT_SUPER, ProgramMocks, load_config_file, provider_name, run_program

PLATFORM = load_config_file(ROOT / "Pulumi.platform.yaml")
TEAM_A = load_config_file(ROOT / "Pulumi.team-a.yaml")
TEAM_B = load_config_file(ROOT / "Pulumi.team-b.yaml")


def raw(config):
    return {k.split(":", 1)[1]: v for k, v in config.items()}


def jwt(exp: float) -> str:
    body = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


TOKEN = jwt(4102444800)  # 2100-01-01
CA = cluster_ca(TENANT_SUPER)


def team_config(config):
    """A team stack's config with the token its platform owner set (a secret)."""
    return {**config, "gpu-tenancy:managementToken": TOKEN}


@pytest.fixture
def platform_outputs():
    ProgramMocks.stack_outputs = {
        "platform": {
            "managementServer": "https://172.31.0.2:6443",
            "managementCa": CA,
            "network": "gpu-platform",
            "lab": "gpu-platform",
            "address": "172.31.0.2",
            "datastore": "default",
            "teams": [
                # the keys the platform named (team-a's stack, say, was named prod)
                {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132, "schema": "gpu_tenancy_prod_team_a"},
                {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133, "schema": "gpu_tenancy_team_b_team_b"},
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
    # no credential anywhere in what the platform exports; team stacks get server and CA only
    assert "managementKubeconfig" not in rec.stack_outputs
    assert out["managementServer"] == "https://172.31.0.2:6443" and out["managementCa"]
    assert "secret" not in json.dumps(out) and "token" not in json.dumps(out).lower()
    assert out["teams"] == [
        {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132, "schema": "gpu_tenancy_team_a_team_a"},
        {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133, "schema": "gpu_tenancy_team_b_team_b"},
    ]


def test_platform_stack_gives_each_team_its_own_limited_identity():
    rec = run_program(PLATFORM, stack="platform")
    for name in ("team-a", "team-b"):
        assert rec.named(f"team-{name}-ns").inputs["metadata"]["name"] == f"tenant-{name}"
        account = rec.named(f"team-{name}-account").inputs["metadata"]
        assert account == {"name": "gpu-tenancy-team", "namespace": f"tenant-{name}"}
        assert rec.named(f"team-{name}-role").inputs["rules"] == control_plane_rules(name)
        # one namespace per team: KWOK runs on the lab host, not in the shared cluster
        assert not [r for r in rec.registrations if r.name.startswith(f"team-{name}-") and r.name.endswith("sim-ns")]
        binding = rec.named(f"team-{name}-tcp-policy-binding").inputs["spec"]
        assert binding["matchResources"]["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": f"tenant-{name}"
        }
    # nothing cluster-wide is granted to a team
    assert not [r for r in rec.registrations if r.type.startswith("kubernetes:rbac.authorization.k8s.io/v1:Cluster")]


def test_a_team_stack_without_its_token_stops_naming_the_key():
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(TEAM_A))
    assert [k for k, _ in err.value.problems] == ["gpu-tenancy:managementToken"]
    assert "scripts/grant-team.sh" in err.value.problems[0][1]


def test_an_expired_team_token_stops_with_a_plain_error(platform_outputs):
    with pytest.raises(Exception, match="managementToken expired .* renew it"):
        run_program(
            {**TEAM_A, "gpu-tenancy:managementToken": jwt(1000)},
            stack="team-a",
            secret_keys=("gpu-tenancy:managementToken",),
        )


@pytest.mark.parametrize(("config", "team", "stack"), [(TEAM_A, "team-a", "team-a"), (TEAM_B, "team-b", "team-b")])
def test_team_stack_creates_only_its_tenant_on_the_platform(platform_outputs, config, team, stack):
    rec = run_program(team_config(config), stack=stack, secret_keys=("gpu-tenancy:managementToken",))
    types = {r.type for r in rec.registrations}
    assert "gpu-tenancy:index:ManagementCluster" not in types and "gpu-tenancy:index:KamajiPlatform" not in types
    assert not [r for r in rec.registrations if r.name.startswith("management-")]
    (ref,) = rec.of_type("pulumi:pulumi:StackReference")
    assert ref.name == "organization/gpu-tenancy/platform"
    assert [r.name for r in rec.of_type("gpu-tenancy:index:GpuTenant")] == [team]
    tcp = rec.named(f"{team}-cp-tcp")
    assert tcp.provider.split("::")[-2] == "platform-k8s"
    # the team's own token, never the admin; the namespaces are the platform's (not created here)
    expected = token_kubeconfig("https://172.31.0.2:6443", CA, TOKEN, "gpu-tenancy-team")
    assert rec.named("platform-k8s").inputs["kubeconfig"] == {"secret": expected}
    assert all(provider_name(n) == f"{team}-cp-k8s" for n in rec.of_type("kubernetes:core/v1:Namespace"))
    worker = rec.named(f"{team}-worker-0-container").inputs
    assert worker["name"] == f"gpu-platform-{team}-worker-0"
    assert worker["networksAdvanced"][0]["name"] == "gpu-platform"
    # the keys the platform named for the team, not ones of the team stack's own making
    (slot,) = [s for s in platform_outputs["platform"]["teams"] if s["name"] == team]
    assert tcp.inputs["spec"]["dataStoreSchema"] == tcp.inputs["spec"]["dataStoreUsername"] == slot["schema"]


def test_a_team_stack_on_a_platform_that_names_no_keys_stops_saying_so(platform_outputs):
    for slot in platform_outputs["platform"]["teams"]:
        del slot["schema"]
    with pytest.raises(Exception, match="names no etcd keys for tenant 'team-a'.*`pulumi up` on the platform stack"):
        run_program(team_config(TEAM_A), stack="team-a", secret_keys=("gpu-tenancy:managementToken",))


def test_the_platform_names_each_teams_keys():
    rec = run_program(PLATFORM, stack="platform")
    schemas = {t["name"]: t["schema"] for t in rec.stack_outputs["platform"]["teams"]}
    assert schemas == {"team-a": "gpu_tenancy_team_a_team_a", "team-b": "gpu_tenancy_team_b_team_b"}
    policy = rec.named("team-team-a-tcp-policy").inputs["spec"]
    (rule,) = [v["expression"] for v in policy["validations"] if "dataStoreSchema" in v["message"]]
    assert "== 'gpu_tenancy_team_a_team_a'" in rule and "endsWith" not in rule


def test_two_team_stacks_cannot_collide():
    a = load_stack_config("gpu-tenancy", raw(TEAM_A), management_token_given=True)
    b = load_stack_config("gpu-tenancy", raw(TEAM_B), management_token_given=True)
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
        run_program(team_config(config), stack="team-a", secret_keys=("gpu-tenancy:managementToken",))


@pytest.mark.parametrize(
    ("change", "key", "text"),
    [
        ({"gpu-tenancy:role": "cluster"}, "gpu-tenancy:role", "must be one of lab, platform, team"),
        ({"gpu-tenancy:platformStack": "platform"}, "gpu-tenancy:platformStack", "<org>/<project>/<stack>"),
    ],
)
def test_bad_team_config(change, key, text):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw({**TEAM_A, **change}), management_token_given=True)
    assert [k for k, _ in err.value.problems] == [key]
    assert text in err.value.problems[0][1]


def test_platform_registry_rejects_duplicates_and_tenants():
    config = {**PLATFORM, "gpu-tenancy:teams": PLATFORM["gpu-tenancy:teams"] * 2}
    with pytest.raises(ConfigError, match="duplicate team name 'team-a'"):
        load_stack_config("gpu-tenancy", raw(config))
    with pytest.raises(ConfigError, match="a platform stack has no tenants"):
        load_stack_config("gpu-tenancy", raw({**PLATFORM, "gpu-tenancy:tenants": TEAM_A["gpu-tenancy:tenants"]}))


def registry(*teams: dict) -> dict:
    return {**raw(PLATFORM), "teams": list(teams)}


def test_a_teams_stack_name_keeps_its_keys():
    """A team whose stack is not named after it keeps the keys Kamaji made from its stack's name."""
    cfg = load_stack_config(
        "gpu-tenancy",
        registry(
            {"name": "team-a", "apiPort": 31443, "konnectivityPort": 31132, "stack": "prod"},
            {"name": "team-b", "apiPort": 31444, "konnectivityPort": 31133},
        ),
    )
    assert [s.datastore_schema("gpu-tenancy") for s in cfg.teams] == [
        "gpu_tenancy_prod_team_a",
        "gpu_tenancy_team_b_team_b",
    ]


@pytest.mark.parametrize(
    ("teams", "key", "said"),
    [
        (  # stack names may hold `_`: x_team + a and x + team-a both make gpu_tenancy_x_team_a
            [
                {"name": "a", "apiPort": 31443, "konnectivityPort": 31132, "stack": "x_team"},
                {"name": "team-a", "apiPort": 31444, "konnectivityPort": 31133, "stack": "x"},
            ],
            "gpu-tenancy:teams[1].stack",
            "would be a's too",
        ),
        (
            [{"name": "a", "apiPort": 31443, "konnectivityPort": 31132, "stack": "prod.eu"}],
            "gpu-tenancy:teams[0].stack",
            "letters, digits",
        ),
        (
            [{"name": "a", "apiPort": 31443, "konnectivityPort": 31132, "stack": ""}],
            "gpu-tenancy:teams[0].stack",
            "non-empty",
        ),
    ],
)
def test_a_registry_whose_teams_would_share_keys_or_name_no_stack_is_refused(teams, key, said):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", registry(*teams))
    ((found, message),) = err.value.problems
    assert found == key and said in message


@pytest.mark.parametrize(
    ("platform_mirror", "team_mirror", "said"),
    [
        ("http://172.17.0.1:5000", None, "mirror.endpoint is None but the platform's lab pulls through"),
        ("http://172.17.0.1:5000", "http://172.17.0.1:5001", "the lab has one mirror"),
        (None, "http://172.17.0.1:5000", "the platform's lab has no mirror"),
    ],
)
def test_a_team_stack_pulls_through_the_labs_one_mirror(platform_outputs, platform_mirror, team_mirror, said):
    platform_outputs["platform"]["mirror"] = platform_mirror or ""
    config = team_config(TEAM_A)
    if team_mirror:
        config["gpu-tenancy:mirror"] = {"endpoint": team_mirror}
    with pytest.raises(Exception, match=said):
        run_program(config, stack="team-a", secret_keys=("gpu-tenancy:managementToken",))
    config["gpu-tenancy:mirror"] = {"endpoint": platform_mirror} if platform_mirror else None
    if config["gpu-tenancy:mirror"] is None:
        del config["gpu-tenancy:mirror"]
    rec = run_program(config, stack="team-a", secret_keys=("gpu-tenancy:managementToken",))
    worker = next(r for r in rec.of_type("docker:index/container:Container") if "worker" in r.name)
    assert bool(worker.inputs.get("uploads")) == bool(platform_mirror)


def test_the_platform_exports_its_mirror():
    config = {**PLATFORM, "gpu-tenancy:mirror": {"endpoint": "http://172.17.0.1:5000"}}
    assert run_program(config, stack="platform").stack_outputs["platform"]["mirror"] == "http://172.17.0.1:5000"
    assert run_program(PLATFORM, stack="platform").stack_outputs["platform"]["mirror"] == ""
