"""Stack config validation: each bad value gives one error naming its key, and no resource."""

import copy

import pytest
import yaml

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from tests.support.harness import ROOT, load_config_file, run_program

DEV = load_config_file(ROOT / "Pulumi.dev.yaml")


def raw(config: dict) -> dict:
    return {k.split(":", 1)[1]: v for k, v in config.items()}


def test_dev_config_is_valid():
    cfg = load_stack_config("gpu-tenancy", raw(DEV))
    assert [t.name for t in cfg.tenants] == ["team-a", "team-b"]
    a, b = cfg.tenants
    assert (a.gpu.model.memory_mb, a.gpu.cards_per_node) == (81920, 1)
    assert (b.gpu.model.memory_mb, b.gpu.cards_per_node) == (23034, 4)
    assert a.dns_service_ip == "10.96.0.10" and b.dns_service_ip == "10.97.0.10"


def mutate(path: str, value: object) -> dict:
    """Copy of the dev config with one value replaced (path like 'tenants.0.quota.gpumemMb')."""
    return mutate_in(DEV, path, value)


def mutate_in(base: dict, path: str, value: object) -> dict:
    config = copy.deepcopy(base)
    head, *rest = path.split(".")
    node = config[f"gpu-tenancy:{head}"]
    for i, part in enumerate(rest):
        key = int(part) if part.isdigit() else part
        if i == len(rest) - 1:
            if value is DELETE:
                del node[key]
            else:
                node[key] = value
        else:
            node = node[key]
    return config


DELETE = object()

BAD = [
    (
        "tenants.0.gpu.model",
        "H100",
        "gpu-tenancy:tenants[0].gpu.model",
        "unknown GPU model 'H100'; allowed: A100-80GB, L4",
    ),
    ("tenants.0.quota.gpumemMb", "10Gi", "gpu-tenancy:tenants[0].quota.gpumemMb", "give plain MB, e.g. 10240 for 10Gi"),
    ("tenants.1.quota.gpumemMb", 20000, "gpu-tenancy:tenants[1].quota.gpumemMb", "below one L4 card (23034 MB)"),
    ("tenants.0.quota.gpucoresPercent", 50, "gpu-tenancy:tenants[0].quota.gpucoresPercent", "below one card (100 %)"),
    ("tenants.1.name", "team-a", "gpu-tenancy:tenants[1].name", "duplicate tenant name 'team-a'"),
    ("tenants.0.name", "Team_A", "gpu-tenancy:tenants[0].name", "must be a DNS-1035 label"),
    ("tenants.0.gpu.cardsPerNode", 2, "gpu-tenancy:tenants[0].gpu.cardsPerNode", "more than the mock device plugin"),
    ("tenants.1.apiPort", 31443, "gpu-tenancy:tenants[1].apiPort", "port 31443 is already used by tenants[0].apiPort"),
    ("tenants.0.apiPort", 6443, "gpu-tenancy:tenants[0].apiPort", "must be 30000-32767"),
    ("tenants.0.kubernetesVersion", "v1.36.0", "gpu-tenancy:tenants[0].kubernetesVersion", "no worker image is pinned"),
    ("tenants.0.podCidr", "172.30.0.0/16", "gpu-tenancy:tenants[0].podCidr", "overlaps the Docker network"),
    ("tenants.0.gpu.modle", "A100-80GB", "gpu-tenancy:tenants[0].gpu.modle", "unknown key"),
    ("cluster.mode", "kind", "gpu-tenancy:cluster.mode", "must be 'docker' or 'kubeconfig'"),
    ("cluster.managementIp", "10.0.0.5", "gpu-tenancy:cluster.managementIp", "must be a host address inside"),
    ("hami.nodeLockTimeout", "five minutes", "gpu-tenancy:hami.nodeLockTimeout", "Go duration"),
    ("hami.kubeQps", 0, "gpu-tenancy:hami.kubeQps", "must be 1-1000 requests/s"),
    ("hami.kubeQps", "fast", "gpu-tenancy:hami.kubeQps", "must be an integer 1-1000"),
    ("hami.kubeBurst", 10, "gpu-tenancy:hami.kubeBurst", "must be at least hami.kubeQps (200)"),
    ("hami.nodeSchedulerPolicy", "pack", "gpu-tenancy:hami.nodeSchedulerPolicy", "must be one of binpack, spread"),
    ("hami.logLevel", 11, "gpu-tenancy:hami.logLevel", "must be 0-10"),
    ("tenants.0.pools.0.nodes", 0, "gpu-tenancy:tenants[0].pools[0].nodes", "must be 1-5000"),
    ("tenants.0.pools.0.nodes", 11, "gpu-tenancy:tenants[0].pools", "11 docker nodes in all; a tenant has at most 10"),
    ("tenants.0.pools.0.mode", "kind", "gpu-tenancy:tenants[0].pools[0].mode", "must be one of docker, kwok, external"),
    ("tenants.0.pools.0.mode", "kwok", "gpu-tenancy:tenants[0].pools", "needs a docker or an external pool"),
    ("tenants.0.pools.0.joinTokenHours", 2, "gpu-tenancy:tenants[0].pools[0].joinTokenHours", "only external pools"),
    ("tenants.0.pools.0.joinTokenHours", 25, "gpu-tenancy:tenants[0].pools[0].joinTokenHours", "must be 1-24"),
    ("tenants.0.pools.0.name", "Workers", "gpu-tenancy:tenants[0].pools[0].name", "DNS-1035"),
    ("tenants.0.workers", 2, "gpu-tenancy:tenants[0].workers", "is replaced by pools"),
    # Values that used to pass validation and break at apply.
    ("tenants.0.serviceCidr", "100.0.0.0/8", "gpu-tenancy:tenants[0].serviceCidr", "at most /12"),
    ("tenants.0.serviceCidr", "10.96.0.0/11", "gpu-tenancy:tenants[0].serviceCidr", "at most /12"),
    ("hami.nodeLockTimeout", "9999999999999h", "gpu-tenancy:hami.nodeLockTimeout", "at most 2562047h"),
    ("hami.nodeLockTimeout", "2562048h", "gpu-tenancy:hami.nodeLockTimeout", "at most 2562047h"),
    ("hami.nodeLockTimeout", "0s", "gpu-tenancy:hami.nodeLockTimeout", "more than 0"),
    ("hami.nodeLockTimeout", "5m ", "gpu-tenancy:hami.nodeLockTimeout", "Go duration"),
    ("hami.nodeLockTimeout", "1.5h", "gpu-tenancy:hami.nodeLockTimeout", "Go duration"),
    ("cluster.subnet", "172.30.0.0/30", "gpu-tenancy:cluster.subnet", "the tenants run 4 (workers, release"),
    ("cluster.subnet", "172.30.0.0/30", "gpu-tenancy:cluster.subnet", "use a /29 or larger"),
    ("cluster.bootstrapTokenMinutes", 1, "gpu-tenancy:cluster.bootstrapTokenMinutes", "must be 12-1440 min"),
    ("cluster.bootstrapTokenMinutes", 11, "gpu-tenancy:cluster.bootstrapTokenMinutes", "120 s for containerd"),
    ("cluster.nodeImage", "gpu-tenancy/node:v1.35.1", "gpu-tenancy:cluster.nodeImage", "without tag or digest"),
    ("cluster.nodeImage", "gpu-tenancy/node@sha256:" + "a" * 64, "gpu-tenancy:cluster.nodeImage", "without tag"),
    ("cluster.nodeImage", "gpu-tenancy/Node", "gpu-tenancy:cluster.nodeImage", "an image repository"),
    ("cluster.nodeImage", "", "gpu-tenancy:cluster.nodeImage", "non-empty"),
    ("cluster.nodeImage", 3, "gpu-tenancy:cluster.nodeImage", "non-empty string"),
    ("tenants.0.workloads.0.image", " busybox", "gpu-tenancy:tenants[0].workloads[0].image", "an image reference"),
    ("tenants.0.workloads.0.image", "busybox:1.36 ", "gpu-tenancy:tenants[0].workloads[0].image", "image reference"),
    ("tenants.0.workloads.0.image", "Busybox", "gpu-tenancy:tenants[0].workloads[0].image", "an image reference"),
    ("tenants.0.workloads.0.image", "busybox:", "gpu-tenancy:tenants[0].workloads[0].image", "an image reference"),
    ("tenants.0.workloads.0.image", "a b", "gpu-tenancy:tenants[0].workloads[0].image", "an image reference"),
    # Rollouts: what the API server refuses, and a surge the card has no room for (shared-a100 is
    # 3 x 30 % of team-a's one card; its budget, two cards' worth, would have room).
    (
        "tenants.0.workloads.0.rollout",
        {"maxSurge": 1},
        "gpu-tenancy:tenants[0].workloads",
        "Deployment shared-a100[3] cannot be placed on the fleet (worker: 1 node(s) x 1 A100-80GB",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"maxSurge": 1, "maxUnavailable": 0},
        "gpu-tenancy:tenants[0].workloads",
        "x3 +1 surge",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"maxSurge": 0, "maxUnavailable": 0},
        "gpu-tenancy:tenants[0].workloads[0].rollout.maxUnavailable",
        "cannot both be 0",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"strategy": "Recreate", "maxUnavailable": 1},
        "gpu-tenancy:tenants[0].workloads[0].rollout.maxUnavailable",
        "applies to RollingUpdate only",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"strategy": "Recreate", "maxSurge": 0},
        "gpu-tenancy:tenants[0].workloads[0].rollout.maxSurge",
        "applies to RollingUpdate only",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"strategy": "BlueGreen"},
        "gpu-tenancy:tenants[0].workloads[0].rollout.strategy",
        "must be one of RollingUpdate, Recreate",
    ),
    (
        "tenants.0.workloads.0.rollout",
        {"maxSurge": "25%"},
        "gpu-tenancy:tenants[0].workloads[0].rollout.maxSurge",
        "must be an integer 0-100",
    ),
    ("tenants.0.workloads.0.rollout", {"surge": 1}, "gpu-tenancy:tenants[0].workloads[0].rollout.surge", ""),
    ("tenants.0.workloads.0.rollout", "Recreate", "gpu-tenancy:tenants[0].workloads[0].rollout", ""),
]

GOOD = [
    ("cluster.subnet", "172.30.0.0/29"),  # 4 addresses for the dev stack's 4 containers
    ("hami.nodeLockTimeout", "2562047h"),
    ("hami.nodeLockTimeout", "1h30m"),
    ("cluster.bootstrapTokenMinutes", 12),
    ("cluster.nodeImage", "gpu-tenancy/node"),
    ("cluster.nodeImage", "registry.example.com:5000/lab/node"),
    ("tenants.0.serviceCidr", "10.96.0.0/12"),
    ("tenants.0.workloads.0.image", "registry.example.com:5000/team/app@sha256:" + "a" * 64),
    ("tenants.0.workloads.0.image", "busybox"),
    ("tenants.0.workloads.0.rollout", {"strategy": "Recreate"}),
    ("tenants.0.workloads.0.rollout", {"maxSurge": 0, "maxUnavailable": 3}),
    ("tenants.0.workloads.0.rollout", {}),
]


def test_a_deployment_rolls_out_one_pod_at_a_time_by_default_and_a_pod_has_no_rollout():
    team_a = load_stack_config("gpu-tenancy", raw(DEV)).tenants[0]
    (w,) = team_a.workloads
    assert w.strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    demand = w.demand(team_a.fleet.models)
    assert (demand.replicas, demand.surge, demand.usage.gpucores) == (3, 0, 90)
    config = mutate("tenants.0.workloads.0.kind", "Pod")
    config = mutate_in(config, "tenants.0.workloads.0.replicas", 1)
    config = mutate_in(config, "tenants.0.workloads.0.rollout", {"strategy": "Recreate"})
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config))
    assert err.value.problems == [
        (
            "gpu-tenancy:tenants[0].workloads[0].rollout",
            "a Pod has no rollout (it is replaced whole); use kind Deployment",
        )
    ]


@pytest.mark.parametrize(("path", "value"), GOOD, ids=[g[0] + "=" + str(g[1])[:30] for g in GOOD])
def test_edge_values_that_work_at_apply_pass(path, value):
    load_stack_config("gpu-tenancy", raw(mutate(path, value)))


@pytest.mark.parametrize(("path", "value", "key", "text"), BAD, ids=[b[0] + "=" + str(b[1]) for b in BAD])
def test_bad_value_gives_one_error_naming_its_key(path, value, key, text):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(mutate(path, value)))
    assert len(err.value.problems) == 1, err.value.problems
    ((got_key, msg),) = err.value.problems
    assert got_key == key
    assert text in msg


def test_all_problems_are_reported_together():
    config = mutate("tenants.0.gpu.model", "H100")
    config["gpu-tenancy:tenants"][1]["quota"]["gpus"] = "lots"
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config))
    assert [k for k, _ in err.value.problems] == [
        "gpu-tenancy:tenants[0].gpu.model",
        "gpu-tenancy:tenants[1].quota.gpus",
    ]


def test_adopt_mode_needs_the_kubeconfig_secret():
    config = mutate("cluster.mode", "kubeconfig")
    with pytest.raises(ConfigError, match="gpu-tenancy:kubeconfig: is required"):
        load_stack_config("gpu-tenancy", raw(config))
    assert load_stack_config("gpu-tenancy", raw(config), kubeconfig_given=True).cluster.mode == "kubeconfig"


def test_missing_tenants():
    with pytest.raises(ConfigError, match="gpu-tenancy:tenants: is required"):
        load_stack_config("gpu-tenancy", {"cluster": None})


@pytest.mark.parametrize(("path", "value", "key", "text"), BAD[:10], ids=[b[0] for b in BAD[:10]])
def test_program_stops_before_any_resource(path, value, key, text):
    with pytest.raises(Exception, match=key.replace("[", r"\[").replace("]", r"\]")) as err:
        run_program(mutate(path, value))
    assert text in str(err.value)


def test_program_with_bad_config_registers_nothing():
    import json
    import runpy

    import pulumi

    from components.domain.names import PROJECT
    from tests.support.harness import ProgramMocks, Recorder

    rec = Recorder()
    pulumi.runtime.set_mocks(ProgramMocks(), project=PROJECT, stack="dev", monitor=rec)
    config = mutate("tenants.0.gpu.model", "H100")
    pulumi.runtime.set_all_config({k: json.dumps(v) for k, v in config.items()}, [])

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    with pytest.raises(pulumi.RunError):
        program()
    assert rec.registrations == []


WORKLOAD_BAD = [
    ("gpumemMb", "10Gi", "gpu-tenancy:tenants[0].workloads[0].gpumemMb", "plain integer in MB"),
    ("gpucoresPercent", 150, "gpu-tenancy:tenants[0].workloads[0].gpucoresPercent", "must be 0-100"),
    ("gpumemMb", 90000, "gpu-tenancy:tenants[0].workloads[0]", "90000 MB exceeds one NVIDIA A100 80GB card"),
    ("replicas", 4, "gpu-tenancy:tenants[0].workloads", "shared-a100[3] cannot be placed on the fleet"),
    ("cardType", "H100", "gpu-tenancy:tenants[0].workloads[0].cardType", "matches no card of this tenant"),
    ("kind", "Job", "gpu-tenancy:tenants[0].workloads[0].kind", "must be one of Pod, Deployment"),
]


@pytest.mark.parametrize(
    ("key", "value", "where", "text"), WORKLOAD_BAD, ids=[w[0] + "=" + str(w[1]) for w in WORKLOAD_BAD]
)
def test_bad_workload_gives_one_error(key, value, where, text):
    config = mutate(f"tenants.0.workloads.0.{key}", value)
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config))
    assert len(err.value.problems) == 1, err.value.problems
    ((got_key, msg),) = err.value.problems
    assert got_key == where
    assert text in msg


def test_unplaceable_workload_needs_to_be_declared_on_purpose():
    config = mutate("tenants.0.workloads.0.replicas", 3)
    config["gpu-tenancy:tenants"][0]["quota"] = {"gpus": 10, "gpumemMb": 200000, "gpucoresPercent": 200}
    extra = {"name": "fourth", "image": "busybox", "gpumemMb": 20000, "gpucoresPercent": 30}
    config["gpu-tenancy:tenants"][0]["workloads"].append(extra)
    with pytest.raises(ConfigError, match=r"fourth\[0\] cannot be placed on the fleet"):
        load_stack_config("gpu-tenancy", raw(config))
    extra["failOnPending"] = False
    cfg = load_stack_config("gpu-tenancy", raw(config))
    assert [w.name for w in cfg.tenants[0].workloads] == ["shared-a100", "fourth"]


def tenant_with_pools(pools: list[dict], **extra: object) -> dict:
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:tenants"][0]["pools"] = pools
    config["gpu-tenancy:tenants"][0].update(extra)
    return config


def test_pools_mix_docker_and_kwok_and_count_every_gpu_node():
    cfg = load_stack_config(
        "gpu-tenancy",
        raw(
            tenant_with_pools(
                [{"name": "worker", "nodes": 1}, {"name": "sim", "mode": "kwok", "nodes": 200}],
                podCidr="10.0.0.0/15",
            )
        ),
    )
    a = cfg.tenants[0]
    # The cards are on the simulated nodes; the docker worker runs the system pods.
    assert a.fleet.nodes == 200 and not a.real_gpus and [p.name for p in a.gpu_pools] == ["sim"]
    assert a.node_names("gpu-lab", a.pools[1])[:2] == ["gpu-lab-team-a-sim-0", "gpu-lab-team-a-sim-1"]
    # The default docker pool keeps the names workers always had.
    assert a.node_names("gpu-lab", a.pools[0]) == ["gpu-lab-team-a-worker-0"]


def test_external_pool_brings_the_fleet_and_docker_workers_only_run_system_pods():
    cfg = load_stack_config(
        "gpu-tenancy",
        raw(
            tenant_with_pools(
                [{"name": "worker", "nodes": 1}, {"name": "gpus", "mode": "external", "nodes": 4}],
                gpu={"model": "A100-80GB", "cardsPerNode": 8},
            )
        ),
    )
    a = cfg.tenants[0]
    assert a.real_gpus and [p.name for p in a.gpu_pools] == ["gpus"]
    assert (a.fleet.nodes, a.fleet.groups[0].cards_per_node) == (
        4,
        8,
    )  # the mock plugin's per-node limit does not apply
    assert a.node_names("gpu-lab", a.pools[1]) == []  # the machines name themselves


@pytest.mark.parametrize(
    ("pools", "extra", "key", "text"),
    [
        (
            [{"name": "worker"}, {"name": "sim", "mode": "kwok", "nodes": 300}],
            {},
            "gpu-tenancy:tenants[0].podCidr",
            "for 301 node(s); use a /15 or larger",
        ),
        (
            [{"name": "worker"}, {"name": "worker", "mode": "kwok", "nodes": 3}],
            {},
            "gpu-tenancy:tenants[0].pools[1].name",
            "duplicate pool name 'worker'",
        ),
        (
            [{"name": "worker"}, {"name": "sim", "mode": "kwok"}, {"name": "gpus", "mode": "external"}],
            {},
            "gpu-tenancy:tenants[0].pools",
            "one tenant's HAMi runs one device plugin",
        ),
        ([], {}, "gpu-tenancy:tenants[0].pools", "at least one pool"),
        (
            [{"name": "worker", "nodes": 6}, {"name": "more", "nodes": 5}],
            {"podCidr": "10.244.0.0/16"},
            "gpu-tenancy:tenants[0].pools",
            "11 docker nodes in all",
        ),
        (
            [{"name": "worker"}, {"name": "gpus", "mode": "external", "nodes": 1001}],
            {"podCidr": "10.0.0.0/13"},
            "gpu-tenancy:tenants[0].pools[1].nodes",
            "an external pool holds at most 1000 nodes",
        ),
    ],
    ids=["podcidr-counts-kwok-nodes", "duplicate-pool", "kwok-and-external", "no-pool", "docker-total", "external-max"],
)
def test_bad_pools_give_one_error_naming_the_key(pools, extra, key, text):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(tenant_with_pools(pools, **extra)))
    assert len(err.value.problems) == 1, err.value.problems
    ((got_key, msg),) = err.value.problems
    assert got_key == key and text in msg, (got_key, msg)


def test_node_names_stay_unique_across_tenants_and_pools():
    # team-a's pool "b-worker" would make gpu-lab-team-a-b-worker-0, as would tenant "team-a-b"'s default pool.
    config = tenant_with_pools([{"name": "worker"}, {"name": "b-worker", "mode": "kwok"}])
    other = copy.deepcopy(config["gpu-tenancy:tenants"][1])
    other.update(name="team-a-b", apiPort=31445, konnectivityPort=31134, podCidr="10.246.0.0/16")
    other["serviceCidr"] = "10.98.0.0/16"
    config["gpu-tenancy:tenants"].append(other)
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config))
    ((key, msg),) = err.value.problems
    assert key == "gpu-tenancy:tenants[2].pools[0].name"
    assert "'gpu-lab-team-a-b-worker-0' is also made by tenants[0].pools[1]" in msg


def test_eight_a100_per_node_fit_a_kwok_pool_not_a_docker_worker():
    big = {"model": "A100-80GB", "cardsPerNode": 8}
    ok = load_stack_config(
        "gpu-tenancy",
        raw(tenant_with_pools([{"name": "worker"}, {"name": "sim", "mode": "kwok", "nodes": 10}], gpu=big)),
    )
    assert ok.tenants[0].fleet.capacity.gpumem_mb == 10 * 8 * 81920
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(tenant_with_pools([{"name": "worker"}], gpu=big)))
    ((key, msg),) = err.value.problems
    assert key == "gpu-tenancy:tenants[0].gpu.cardsPerNode" and "put the cards on a kwok pool" in msg


@pytest.mark.parametrize("name", ["Pulumi.fleet.yaml", "Pulumi.gpus.yaml"])
def test_example_stack_files_are_valid(name):
    cfg = load_stack_config("gpu-tenancy", raw(load_config_file(ROOT / "examples" / name)), kubeconfig_given=True)
    (t,) = cfg.tenants
    assert t.docker_nodes == 1 and t.fleet.groups[0].cards_per_node == 8
    assert (t.real_gpus, t.fleet.nodes) == ((False, 200) if "fleet" in name else (True, 4))


def test_a_stack_file_is_read_as_up_reads_its_config(tmp_path):
    """The offline tools' loader (load_stack_file) and `up`'s (load_config over Pulumi's config)
    are one: the same StackConfig from the same keys, secrets only noted as given."""
    from components.config.load import load_config, load_stack_file
    from components.domain.names import PROJECT

    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"] == PROJECT
    from_file = load_stack_file(ROOT / "Pulumi.dev.yaml")
    assert from_file == load_config(PROJECT, raw(DEV).get)
    assert from_file == load_stack_config(PROJECT, raw(DEV))
    adopted = tmp_path / "Pulumi.adopted.yaml"
    cluster = {"mode": "kubeconfig", "name": "prod", "subnet": "172.30.2.0/24", "managementIp": "172.30.2.2"}
    body = {**DEV, "gpu-tenancy:cluster": cluster}
    adopted.write_text(yaml.safe_dump({"config": body}))
    with pytest.raises(ConfigError, match="kubeconfig"):
        load_stack_file(adopted)
    adopted.write_text(yaml.safe_dump({"config": {**body, "gpu-tenancy:kubeconfig": {"secure": "v1:abc"}}}))
    assert load_stack_file(adopted).cluster.mode == "kubeconfig"


def two_workloads(first: tuple[str, str], second: tuple[str, str]) -> dict:
    """The dev config with team-a's workload as two, in the (namespace, name)s given."""
    config = copy.deepcopy(DEV)
    team_a = config["gpu-tenancy:tenants"][0]
    base = {**team_a["workloads"][0], "replicas": 1, "gpumemMb": 8000, "gpucoresPercent": 25}
    team_a["workloads"] = [{**base, "namespace": ns, "name": name} for ns, name in (first, second)]
    return config


@pytest.mark.parametrize(("first", "second"), [(("a-b", "c"), ("a", "b-c")), (("ml", "x-y"), ("ml-x", "y"))])
def test_workloads_that_derive_one_resource_name_give_one_error(first, second):
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(two_workloads(first, second)))
    ((key, msg),) = err.value.problems
    assert key == "gpu-tenancy:tenants[0].workloads[1].name"
    assert f"workload name 'team-a-{first[0]}-{first[1]}' is also made by tenants[0].workloads[0].name" in msg


def test_workload_names_stay_unique_across_tenants():
    # tenant team-a's workload b-x/y and tenant team-a-b's x/y are both 'team-a-b-x-y'.
    config = two_workloads(("b-x", "y"), ("ml", "z"))
    other = copy.deepcopy(config["gpu-tenancy:tenants"][1])
    other.update(name="team-a-b", apiPort=31445, konnectivityPort=31134, podCidr="10.246.0.0/16")
    other["serviceCidr"] = "10.98.0.0/16"
    other["workloads"] = [{**other["workloads"][0], "namespace": "x", "name": "y"}]
    config["gpu-tenancy:tenants"].append(other)
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", raw(config))
    ((key, msg),) = err.value.problems
    assert key == "gpu-tenancy:tenants[2].workloads[0].name"
    assert "'team-a-b-x-y' is also made by tenants[0].workloads[0].name" in msg
