"""The pack fails closed on every kind: each kind the rulebook counts is counted (over-budget
refused), every other object naming nvidia.com/ resources is refused unless it declares its
usage (the declaration then counts), values unknown at preview count at their least, and the
program's own objects for the dev stack pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pulumi_policy import PolicyProviderResource

from tests.support.harness import load_config_file, run_program
from tests.support.policy_pack import (
    CONFIG,
    ENDPOINTS,
    POLICY,
    container,
    go,
    gp,
    gt,
    obj,
    pod_spec,
    provider,
    run_resource,
    run_stack,
)

ROOT = Path(__file__).resolve().parents[2]
CARD = {"nvidia.com/gpu": "1"}  # a whole A100: team-a's quota holds 1 card's memory, 100 % cores
RESOURCE_POLICIES = [
    p.name
    for p in gp.POLICIES
    if hasattr(p, "validate") and p.name in ("gpu-tenant-known", "gpu-usage-countable", "gpu-request-fits-one-card")
]


def gpu_template(kind: str, name: str, count: int, tenant: str = "team-a", **spec_extra):
    typ, props = obj(kind, name, pod_spec(container(CARD)), tenant, replicas=count if kind != "DaemonSet" else None)
    props["spec"].update(spec_extra)
    return typ, props


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("ReplicationController", {}),
        ("StatefulSet", {}),
        ("ReplicaSet", {}),
        ("Deployment", {"strategy": {"type": "Recreate"}}),
        ("Deployment", {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}}),
        ("Job", {}),
        ("CronJob", {"concurrencyPolicy": "Forbid"}),
    ],
)
def test_over_budget_counted_kinds_are_refused(kind, extra):
    assert run_stack("gpu-quota-per-tenant", [gpu_template(kind, "one", 1, **extra)]) == []
    typ, props = gpu_template(kind, "two", 2, **extra)
    if kind == "CronJob":
        props["spec"]["jobTemplate"]["spec"]["parallelism"] = 2
    (msg,) = run_stack("gpu-quota-per-tenant", [(typ, props)])
    assert "tenant team-a is over its GPU quota" in msg and f"{kind} two x2" in msg


@pytest.mark.parametrize(
    ("strategy", "counted"),
    [
        (None, "x1 +1 surge"),  # the API's default: RollingUpdate, maxSurge 25 % rounded up
        ({"type": "RollingUpdate"}, "x1 +1 surge"),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}, "x1 +1 surge"),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%"}}, "x1 +1 surge"),
    ],
)
def test_a_deployment_that_surges_is_counted_at_its_rollouts_peak(strategy, counted):
    """One whole card fits the budget; its rollout's surge pod would need a second one."""
    extra = {"strategy": strategy} if strategy else {}
    (msg,) = run_stack("gpu-quota-per-tenant", [gpu_template("Deployment", "surging", 1, **extra)])
    assert f"Deployment surging {counted}" in msg and "gpucores % 200 > quota 100" in msg
    (fit,) = run_stack("gpu-fleet-fit", [gpu_template("Deployment", "surging", 1, **extra)])
    assert "Deployment surging[1] cannot be placed" in fit


def test_a_daemonset_that_surges_counts_its_surge_per_node():
    two_nodes = {"tenants": [{**CONFIG["tenants"][0], "pools": [{"name": "worker", "nodes": 2}]}]}
    slices = {"nvidia.com/gpumem": "30000", "nvidia.com/gpucores": "20"}  # two fit the budget, three do not
    typ, props = obj("DaemonSet", "ds", pod_spec(container(slices)), "team-a")
    assert run_stack("gpu-quota-per-tenant", [(typ, props)], config=two_nodes) == []
    props["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}
    (msg,) = run_stack("gpu-quota-per-tenant", [(typ, props)], config=two_nodes)
    assert "DaemonSet ds x2 +1 surge" in msg


def test_a_daemonset_counts_once_per_node():
    two_nodes = {"tenants": [{**CONFIG["tenants"][0], "pools": [{"name": "worker", "nodes": 2}]}]}
    typ, props = gpu_template("DaemonSet", "ds", 1)
    (msg,) = run_stack("gpu-quota-per-tenant", [(typ, props)], config=two_nodes)
    assert "DaemonSet ds x2" in msg


def test_a_patch_type_is_counted_like_its_kind():
    typ, props = gpu_template("Deployment", "patched", 2)
    (msg,) = run_stack("gpu-quota-per-tenant", [(typ + "Patch", props)])
    assert "Deployment patched x2" in msg


def test_a_pod_template_counts_one_pod():
    spec = pod_spec(container({"nvidia.com/gpumem": "90000"}))
    props = {"metadata": {"name": "tpl", "labels": {gt.TENANT_LABEL: "team-a"}}, "template": {"spec": spec}}
    (msg,) = run_resource("gpu-request-fits-one-card", "kubernetes:core/v1:PodTemplate", props)
    assert "PodTemplate tpl" in msg and "90000" in msg


@pytest.mark.parametrize("policy", [None, "Allow"])
def test_a_cronjob_whose_jobs_may_overlap_is_refused(policy):
    extra = {"concurrencyPolicy": policy} if policy else {}
    typ, props = gpu_template("CronJob", "nightly", 1, **extra)
    (msg,) = run_resource("gpu-usage-countable", typ, props)
    assert "CronJob nightly" in msg and "concurrencyPolicy" in msg and "Forbid" in msg
    assert POLICY["gpu-usage-countable"].enforcement_level.name == "MANDATORY"


PYTORCH_JOB = (
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "labels": {gt.TENANT_LABEL: "team-a"}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 8,
                    "template": {"spec": {"containers": [container({"nvidia.com/gpu": "8"})]}},
                }
            }
        },
    },
)
HELM = (
    "kubernetes:helm.sh/v3:Release",
    {"chart": "trainer", "values": {"resources": {"limits": {"nvidia.com/gpu": 4}}}},
)
CONFIG_GROUP = (
    "kubernetes:yaml/v2:ConfigGroup",
    {"yaml": "kind: Pod\nspec:\n  containers:\n  - resources:\n      limits:\n        nvidia.com/gpu: 64\n"},
)


@pytest.mark.parametrize(("typ", "props"), [PYTORCH_JOB, HELM, CONFIG_GROUP], ids=["custom-resource", "helm", "yaml"])
def test_an_uncounted_kind_naming_gpus_is_refused_unless_declared(typ, props):
    (msg,) = run_resource("gpu-usage-countable", typ, props, via=provider("team-a"))
    assert "asks for GPUs in a way no quota can count" in msg and "gpu-tenancy/gpu-usage" in msg


def declared(typ: str, props: dict, usage: dict) -> dict:
    props = json.loads(json.dumps(props))
    if typ.endswith("Release"):
        props["values"]["gpu-tenancy/gpu-usage"] = usage
    else:
        props.setdefault("metadata", {}).setdefault("annotations", {})["gpu-tenancy/gpu-usage"] = json.dumps(usage)
    return props


def test_a_declaration_is_counted_against_the_quota():
    typ, props = PYTORCH_JOB
    within = declared(typ, props, {"gpus": 2, "gpumemMb": 40000, "gpucoresPercent": 60})
    assert run_resource("gpu-usage-countable", typ, within, via=provider("team-a")) == []
    assert run_stack("gpu-quota-per-tenant", [(typ, within)]) == []
    over = declared(typ, props, {"gpus": 64, "gpumemMb": 81920 * 8, "gpucoresPercent": 800})
    (msg,) = run_stack("gpu-quota-per-tenant", [(typ, over)])
    assert "PyTorchJob train (declared) x1" in msg and "gpucores % 800 > quota 100" in msg


def test_a_helm_release_declares_in_its_values():
    typ, props = HELM
    ok = declared(typ, props, {"gpus": 1, "gpumemMb": 20000, "gpucoresPercent": 30})
    assert run_resource("gpu-usage-countable", typ, ok, via=provider("team-a")) == []


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        ("{not json", "is not JSON"),
        ('{"gpus": -1}', "gpus must be a whole number >= 0"),
        ('{"cards": 1}', "JSON object"),
    ],
)
def test_a_bad_declaration_is_refused(usage, said):
    typ, props = PYTORCH_JOB
    bad = json.loads(json.dumps(props))
    bad["metadata"]["annotations"] = {"gpu-tenancy/gpu-usage": usage}
    (msg,) = run_resource("gpu-usage-countable", typ, bad, via=provider("team-a"))
    assert said in msg


@pytest.mark.parametrize(
    ("typ", "props"),
    [
        ("kubernetes:helm.sh/v3:Release", {"chart": "hami", "values": {"resourceName": "nvidia.com/gpu"}}),
        ("kubernetes:core/v1:ConfigMap", {"metadata": {"annotations": {"nvidia.com/use-gputype": "A100"}}}),
        ("kubernetes:core/v1:ResourceQuota", {"spec": {"hard": {"limits.nvidia.com/gpu": "10"}}}),
        ("kubernetes:core/v1:ConfigMap", {"data": {"rule": "k.startsWith('nvidia.com/')"}}),
    ],
    ids=["resource-name-as-value", "annotation", "quota-key", "text-not-a-key"],
)
def test_naming_without_asking_passes(typ, props):
    assert run_resource("gpu-usage-countable", typ, props, via=provider("team-a")) == []


def test_an_unknown_gpu_value_is_refused_when_no_value_has_room():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    full = obj("Pod", "full", pod_spec(container({"nvidia.com/gpu": "10"})))  # every vGPU of the quota
    typ, props = obj("Pod", "late", pod_spec(container({"nvidia.com/gpumem": UNKNOWN_STRING_VALUE})))
    late = (typ, unknown_checking_proxy(props))
    (msg,) = run_stack("gpu-quota-per-tenant", [full, late])
    assert "GPUs 11 > quota 10" in msg and "Pod late (values unknown at preview, counted at their least)" in msg
    assert run_stack("gpu-quota-per-tenant", [late]) == []  # room left: advisory only
    (said,) = run_resource("gpu-values-unknown-at-preview", typ, unknown_checking_proxy(props))
    assert "could not check Pod late" in said and "main.resources[nvidia.com/gpumem]" in said


def test_the_dev_stacks_own_objects_pass_every_resource_policy():
    """The program's objects, as it registers them for the dev stack, through each resource
    policy with their real providers' inputs: nothing of the program's own is refused."""
    config = load_config_file(ROOT / "Pulumi.dev.yaml")
    rec = run_program(config)
    providers = {r.urn: r for r in rec.registrations if r.type.startswith("pulumi:providers:")}
    pack = {"tenants": config["gpu-tenancy:tenants"]}
    gt.STACK_CONFIG.clear()
    gt.STACK_CONFIG.update({k: json.dumps(v) for k, v in config.items() if not isinstance(v, str)})
    asked = 0
    try:
        for r in rec.registrations:
            if not r.custom or r.type.startswith("pulumi:providers:"):
                continue
            p = providers.get((r.provider or "").rsplit("::", 1)[0])
            via = PolicyProviderResource(p.type, p.inputs, p.urn, p.name) if p else None
            w = go.workload_of(r.type, r.inputs, r.name)
            asked += bool(w and w.asks_for_gpu)
            for name in RESOURCE_POLICIES:
                assert run_resource(name, r.type, r.inputs, config=pack, via=via) == [], (name, r.type, r.name)
    finally:
        gt.STACK_CONFIG.clear()
    workloads = sum(len(t.get("workloads", [])) for t in config["gpu-tenancy:tenants"])
    assert asked == workloads > 0  # the dev stack's GPU workloads were looked at, not skipped
    assert set(ENDPOINTS) <= {t["name"] for t in config["gpu-tenancy:tenants"]}
