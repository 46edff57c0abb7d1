"""The three ways to run the program: lab (tested in test_graph), platform, team."""

import base64
import dataclasses
import json
import re

import pytest

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.kube import platform_record
from components.kube.client import token_kubeconfig
from components.kube.platform_record import PlatformRecord, PlatformUnreadable
from tests.support.harness import ROOT, deps, load_config_file, provider_name, reaches, run_program
from tests.support.team_grant import CA, GRANT, SECRET, SERVER, TOKEN, jwt, record, team_config

PLATFORM = load_config_file(ROOT / "Pulumi.platform.yaml")
TEAM_A = load_config_file(ROOT / "Pulumi.team-a.yaml")
TEAM_B = load_config_file(ROOT / "Pulumi.team-b.yaml")


def raw(config):
    return {k.split(":", 1)[1]: v for k, v in config.items()}


@pytest.fixture
def published(monkeypatch):
    """What the platform published in each team's namespace (the keys team-a's were named from a
    stack called prod), read as the team stack reads it: each read is recorded, a team with none
    is refused as the API server would refuse its token."""
    records = {
        "team-a": record("team-a", 31443, 31132, "gpu_tenancy_prod_team_a"),
        "team-b": record("team-b", 31444, 31133),
    }
    reads = []

    def read(server, ca, token, team):
        reads.append((server, ca, token, team))
        if team not in records:
            raise PlatformUnreadable(f"cannot read ConfigMap gpu-tenancy-platform in namespace tenant-{team}: 403")
        return records[team]

    monkeypatch.setattr(platform_record, "read_platform_record", read)
    yield records, reads


def test_platform_stack_builds_cluster_and_kamaji_and_publishes_for_teams():
    rec = run_program(PLATFORM, stack="platform")
    types = {r.type for r in rec.registrations}
    assert "gpu-tenancy:index:ManagementCluster" in types and "gpu-tenancy:index:KamajiPlatform" in types
    assert "gpu-tenancy:index:GpuTenant" not in types
    # no credential anywhere in what the platform exports, and nothing a team stack would read
    assert "managementKubeconfig" not in rec.stack_outputs and "platform" not in rec.stack_outputs
    for name, api, konn in (("team-a", 31443, 31132), ("team-b", 31444, 31133)):
        cm = rec.named(f"team-{name}-platform-record").inputs
        assert cm["metadata"] == {"name": "gpu-tenancy-platform", "namespace": f"tenant-{name}"}
        assert PlatformRecord.from_data(cm["data"], "test") == record(name, api, konn)
        text = json.dumps(cm["data"]).lower()
        assert "token" not in text and "private key" not in text and "certificate" not in text


def test_each_team_gets_an_etcd_and_a_datastore_of_its_own():
    rec = run_program(PLATFORM, stack="platform")
    kamaji = rec.named("kamaji-kamaji").inputs["values"]
    # no shared etcd on a platform, and no default DataStore a control plane could fall back to
    assert kamaji["kamaji-etcd"] == {"deploy": False} and kamaji["defaultDatastoreName"] == ""
    assert not [r for r in rec.registrations if r.name == "kamaji-datastore"]
    for team in ("team-a", "team-b"):
        store = f"etcd-{team}"
        assert rec.named(f"team-{team}-etcd-ns").inputs["metadata"]["name"] == store
        issuer = rec.named(f"team-{team}-etcd-issuer").inputs
        assert issuer["metadata"] == {"name": "etcd-selfsigned", "namespace": store}
        assert issuer["spec"] == {"selfSigned": {}}
        release = rec.named(f"team-{team}-etcd-etcd").inputs
        assert release["name"] == store and release["namespace"] == store and release["chart"] == "kamaji-etcd"
        assert release["version"] == "0.17.0"
        values = release["values"]
        assert values["fullnameOverride"] == store and values["replicas"] == 1
        assert values["datastore"] == {"enabled": True, "name": store}
        assert values["quotaBackendBytes"] == str(2048 * 1024 * 1024)
        assert values["persistentVolumeClaim"]["size"] == "4Gi"
        assert values["persistentVolumeClaim"]["retentionPolicyWhenDeleted"] == "Delete"  # destroy leaves none
        assert values["resources"]["limits"]["memory"] and values["resources"]["requests"]["memory"]
        assert values["certManager"]["enabled"] is True and values["selfSignedCertificates"] == {"enabled": False}
        assert values["certManager"]["issuerRef"]["name"] == "etcd-selfsigned"
        # the team's policy holds its control plane to its own DataStore, by equality
        policy = rec.named(f"team-{team}-tcp-policy").inputs["spec"]
        (rule,) = [v for v in policy["validations"] if "spec.dataStore must be" in v["message"]]
        assert f"== '{store}'" in rule["expression"] and store in rule["message"]
        assert rec.named(f"team-{team}-platform-record").inputs["data"]["datastore"] == store
        # made after the team's etcd and access; so on removal it goes first and refuses while used
        teardown = rec.named(f"team-{team}-etcd-datastore")
        assert teardown.inputs["name"] == store
        access = {f"team-{team}-ns", f"team-{team}-binding", f"team-{team}-tcp-policy"}
        assert {f"team-{team}-etcd-etcd", *access} <= deps(rec, f"team-{team}-etcd-datastore")
        assert f"team-{team}-etcd-etcd" in deps(rec, f"team-{team}-ns")
    # nothing of one team's etcd waits on, or is torn down with, another team's
    assert not reaches(rec, "team-team-a-etcd-datastore", "team-team-b-ns")
    assert not reaches(rec, "team-team-b-etcd-datastore", "team-team-a-etcd-etcd")


def test_a_lab_keeps_its_one_shared_datastore():
    rec = run_program(load_config_file(ROOT / "Pulumi.dev.yaml"))
    kamaji = rec.named("kamaji-kamaji").inputs["values"]
    assert kamaji["kamaji-etcd"]["deploy"] is True and kamaji["defaultDatastoreName"] == "default"
    assert rec.named("kamaji-datastore").inputs["name"] == "default"
    assert not [r for r in rec.registrations if r.type == "gpu-tenancy:index:TeamDataStore"]
    assert rec.named("team-a-cp-tcp").inputs["spec"]["dataStore"] == "default"


@pytest.mark.parametrize(
    ("quota", "size", "said"),
    [(256, "1Gi", None), (3000, "6Gi", None), (100, None, "must be 256-8192 MB"), (9000, None, "must be 256-8192")],
)
def test_a_teams_etcd_quota(quota, size, said):
    teams = [dict(t, etcdQuotaMb=quota) for t in PLATFORM["gpu-tenancy:teams"]]
    config = {**PLATFORM, "gpu-tenancy:teams": teams}
    if said:
        with pytest.raises(ConfigError) as err:
            load_stack_config("gpu-tenancy", raw(config))
        keys = [k for k, _ in err.value.problems]
        assert keys == ["gpu-tenancy:teams[0].etcdQuotaMb", "gpu-tenancy:teams[1].etcdQuotaMb"]
        assert said in err.value.problems[0][1]
        return
    values = run_program(config, stack="platform").named("team-team-a-etcd-etcd").inputs["values"]
    assert values["persistentVolumeClaim"]["size"] == size
    assert values["quotaBackendBytes"] == str(quota * 1024 * 1024)


def test_a_team_stack_without_its_grant_stops_naming_each_key():
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(TEAM_A))
    assert [k for k, _ in err.value.problems] == [
        "gpu-tenancy:managementToken",
        "gpu-tenancy:managementServer",
        "gpu-tenancy:managementCa",
    ]
    assert all("scripts/grant-team.sh" in said for _, said in err.value.problems)


def test_an_expired_team_token_stops_with_a_plain_error(published):
    with pytest.raises(Exception, match="managementToken expired .* renew it"):
        run_program(
            {**team_config(TEAM_A), "gpu-tenancy:managementToken": jwt(1000)}, stack="team-a", secret_keys=SECRET
        )
    assert published[1] == []  # nothing was asked of the management cluster


@pytest.mark.parametrize(("config", "team", "stack"), [(TEAM_A, "team-a", "team-a"), (TEAM_B, "team-b", "team-b")])
def test_team_stack_creates_only_its_tenant_on_the_platform(published, config, team, stack):
    rec = run_program(team_config(config), stack=stack, secret_keys=SECRET)
    types = {r.type for r in rec.registrations}
    assert "gpu-tenancy:index:ManagementCluster" not in types and "gpu-tenancy:index:KamajiPlatform" not in types
    assert not [r for r in rec.registrations if r.name.startswith("management-")]
    # the platform is read from the management cluster with the team's grant, never its state
    assert not rec.of_type("pulumi:pulumi:StackReference")
    assert published[1] == [(SERVER, CA, TOKEN, team)]
    assert [r.name for r in rec.of_type("gpu-tenancy:index:GpuTenant")] == [team]
    tcp = rec.named(f"{team}-cp-tcp")
    assert tcp.provider.split("::")[-2] == "platform-k8s"
    # the team's own token, never the admin; the namespaces are the platform's (not created here)
    expected = token_kubeconfig(SERVER, CA, TOKEN, "gpu-tenancy-team")
    assert rec.named("platform-k8s").inputs["kubeconfig"] == {"secret": expected}
    assert all(provider_name(n) == f"{team}-cp-k8s" for n in rec.of_type("kubernetes:core/v1:Namespace"))
    worker = rec.named(f"{team}-worker-0-container").inputs
    assert worker["name"] == f"gpu-platform-{team}-worker-0"
    assert worker["networksAdvanced"][0]["name"] == "gpu-platform"
    # the DataStore and keys the platform named for the team, not ones of the team stack's own making
    mine = published[0][team]
    assert tcp.inputs["spec"]["dataStore"] == mine.datastore
    assert tcp.inputs["spec"]["dataStoreSchema"] == tcp.inputs["spec"]["dataStoreUsername"] == mine.schema


def test_a_team_stack_whose_record_cannot_be_read_stops_naming_the_namespace(published):
    del published[0]["team-a"]
    with pytest.raises(Exception, match="namespace tenant-team-a"):
        run_program(team_config(TEAM_A), stack="team-a", secret_keys=SECRET)


def test_two_team_stacks_cannot_collide():
    a = load_stack_config("gpu-tenancy", raw(team_config(TEAM_A)), management_token_given=True)
    b = load_stack_config("gpu-tenancy", raw(team_config(TEAM_B)), management_token_given=True)
    ta, tb = a.tenants[0], b.tenants[0]
    assert ta.name != tb.name
    assert {ta.api_port, ta.konnectivity_port}.isdisjoint({tb.api_port, tb.konnectivity_port})
    platform = load_stack_config("gpu-tenancy", raw(PLATFORM))
    assert {(s.name, s.api_port, s.konnectivity_port) for s in platform.teams} == {
        (ta.name, ta.api_port, ta.konnectivity_port),
        (tb.name, tb.api_port, tb.konnectivity_port),
    }


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"tenants[0].apiPort": 31444}, "tenants[0].apiPort is 31444 but the platform reserved 31443 for 'team-a'"),
        (
            {"tenants[0].konnectivityPort": 31133},
            "tenants[0].konnectivityPort is 31133 but the platform reserved 31132 for 'team-a'",
        ),
        ({"cluster.name": "other-lab"}, "cluster.name is 'other-lab' but the platform's lab is 'gpu-platform'"),
        ({"cluster.managementIp": "172.31.0.3"}, "cluster.managementIp is '172.31.0.3' but the platform's is"),
    ],
)
def test_team_stack_that_does_not_match_its_record_stops(published, change, said):
    config = json.loads(json.dumps(team_config(TEAM_A)))
    for path, value in change.items():
        section, key = path.split(".")
        node = config[f"gpu-tenancy:{section.removesuffix('[0]')}"]
        (node[0] if section.endswith("[0]") else node)[key] = value
    with pytest.raises(Exception, match=re.escape(said)):
        run_program(config, stack="team-a", secret_keys=SECRET)


@pytest.mark.parametrize(
    ("change", "key", "text"),
    [
        ({"gpu-tenancy:role": "cluster"}, "gpu-tenancy:role", "must be one of lab, platform, team"),
        ({"gpu-tenancy:platformStack": "org/gpu-tenancy/platform"}, "gpu-tenancy:platformStack", "is gone"),
        ({"gpu-tenancy:managementServer": "http://172.31.0.2:6443"}, "gpu-tenancy:managementServer", "https://"),
        ({"gpu-tenancy:managementServer": "172.31.0.2:6443"}, "gpu-tenancy:managementServer", "https://"),
        ({"gpu-tenancy:managementCa": "not base64!"}, "gpu-tenancy:managementCa", "certificate-authority-data"),
        (  # base64, but of no certificate
            {"gpu-tenancy:managementCa": base64.b64encode(b"hello").decode()},
            "gpu-tenancy:managementCa",
            "base64 of PEM",
        ),
    ],
)
def test_bad_team_config(change, key, text):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw({**team_config(TEAM_A), **change}), management_token_given=True)
    assert [k for k, _ in err.value.problems] == [key]
    assert text in err.value.problems[0][1]


def test_a_team_stack_holds_one_tenant():
    second = dict(TEAM_B["gpu-tenancy:tenants"][0])
    config = {**team_config(TEAM_A), "gpu-tenancy:tenants": [*TEAM_A["gpu-tenancy:tenants"], second]}
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config), management_token_given=True)
    ((key, said),) = err.value.problems
    assert key == "gpu-tenancy:tenants" and "tenant-team-a only" in said and "team-a, team-b" in said


@pytest.mark.parametrize("key", ["gpu-tenancy:managementServer", "gpu-tenancy:managementCa"])
@pytest.mark.parametrize("config", [PLATFORM, ROOT / "Pulumi.dev.yaml"])
def test_only_a_team_stack_holds_a_grant(key, config):
    config = load_config_file(config) if isinstance(config, type(ROOT)) else config
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw({**config, key: GRANT[key]}))
    assert [k for k, _ in err.value.problems] == [key]


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
def test_a_team_stack_pulls_through_the_labs_one_mirror(published, platform_mirror, team_mirror, said):
    records = published[0]
    records["team-a"] = dataclasses.replace(records["team-a"], mirror=platform_mirror or "")
    config = team_config(TEAM_A)
    if team_mirror:
        config["gpu-tenancy:mirror"] = {"endpoint": team_mirror}
    with pytest.raises(Exception, match=said):
        run_program(config, stack="team-a", secret_keys=SECRET)
    config["gpu-tenancy:mirror"] = {"endpoint": platform_mirror} if platform_mirror else None
    if config["gpu-tenancy:mirror"] is None:
        del config["gpu-tenancy:mirror"]
    rec = run_program(config, stack="team-a", secret_keys=SECRET)
    worker = next(r for r in rec.of_type("docker:index/container:Container") if "worker" in r.name)
    assert bool(worker.inputs.get("uploads")) == bool(platform_mirror)


def test_the_platform_publishes_its_mirror():
    config = {**PLATFORM, "gpu-tenancy:mirror": {"endpoint": "http://172.17.0.1:5000"}}
    data = run_program(config, stack="platform").named("team-team-a-platform-record").inputs["data"]
    assert data["mirror"] == "http://172.17.0.1:5000"
    assert run_program(PLATFORM, stack="platform").named("team-team-a-platform-record").inputs["data"]["mirror"] == ""
