"""Every policy of the gpu-quotas pack on passing and failing inputs, called directly (plain
dicts) and through the pack's analyzer servicer (read-only proxies, float numbers, config)."""

from __future__ import annotations

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel

from tests.support.policy_pack import (
    CONFIG,
    ENDPOINTS,
    POLICY,
    TEAM_A,
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


def slice_pod(name: str, mem: int = 20000, cores: int = 30, tenant: str = "team-a") -> tuple[str, dict]:
    return obj(
        "Pod", name, pod_spec(container({"nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)})), tenant
    )


# --- resource policy: a single request must fit one card -------------------------------------

FITS = [
    ("slice on A100", slice_pod("p")),
    ("bare gpu is a whole card", obj("Pod", "p", pod_spec(container({"nvidia.com/gpu": "1"})))),
    ("no GPU at all", obj("Pod", "p", pod_spec(container({"cpu": "1"})))),
    ("two L4 cards on a 4-card node", obj("Pod", "p", pod_spec(container({"nvidia.com/gpu": 2}, "c")), "team-b")),
    ("float MB that is whole", obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": 20000.0})))),
    ("requests without limits", obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": "1000"}, where="requests")))),
    ("exactly one A100", slice_pod("p", mem=81920, cores=100)),
    (
        "canonical 20k, as the API server stores 20000",
        obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": "20k"}))),
    ),
]


@pytest.mark.parametrize(("label", "resource"), FITS, ids=[f[0] for f in FITS])
def test_fitting_requests_pass(label, resource):
    assert run_resource("gpu-request-fits-one-card", *resource) == []


MISFITS = [
    (
        "90000 MB on an 81920 MB card",
        slice_pod("big", mem=90000),
        "90000 MB exceeds one NVIDIA A100 80GB card (81920 MB)",
    ),
    (
        "10Gi is not MB",
        obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": "10Gi"}))),
        "'10Gi' is 10737418240, more than HAMi's int32",
    ),
    (
        "not a quantity",
        obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": "lots"}))),
        "not a Kubernetes quantity",
    ),
    ("half a MB", obj("Pod", "p", pod_spec(container({"nvidia.com/gpumem": 20000.5}))), "whole number"),
    ("cores above 100", slice_pod("p", cores=150), "must be 0-100"),
    (
        "two GPUs on a one-card node",
        obj("Pod", "p", pod_spec(container({"nvidia.com/gpu": "2"}))),
        "2 GPUs per container exceeds the 1 cards of one node",
    ),
    ("L4 is 23034 MB", slice_pod("p", mem=24000, tenant="team-b"), "exceeds one NVIDIA L4 24GB card (23034 MB)"),
    (
        "init container",
        obj("Pod", "p", pod_spec(container({"cpu": "1"}), init=[container({"nvidia.com/gpumem": "99999"}, "init")])),
        "container init",
    ),
    (
        "Deployment",
        obj("Deployment", "d", pod_spec(container({"nvidia.com/gpumem": "90000"})), replicas=2),
        "Deployment d",
    ),
    ("StatefulSet", obj("StatefulSet", "s", pod_spec(container({"nvidia.com/gpumem": "90000"}))), "StatefulSet s"),
    ("DaemonSet", obj("DaemonSet", "ds", pod_spec(container({"nvidia.com/gpumem": "90000"}))), "DaemonSet ds"),
    ("Job", obj("Job", "j", pod_spec(container({"nvidia.com/gpumem": "90000"}))), "Job j"),
    ("CronJob", obj("CronJob", "cj", pod_spec(container({"nvidia.com/gpumem": "90000"}))), "CronJob cj"),
    ("ReplicaSet", obj("ReplicaSet", "rs", pod_spec(container({"nvidia.com/gpumem": "90000"}))), "ReplicaSet rs"),
]


@pytest.mark.parametrize(("label", "resource", "text"), MISFITS, ids=[m[0] for m in MISFITS])
def test_misfits_fail_naming_tenant_workload_and_numbers(label, resource, text):
    out = run_resource("gpu-request-fits-one-card", *resource)
    assert len(out) == 1, out
    assert out[0].startswith("tenant team-")
    assert text in out[0]


def test_unlabelled_object_of_the_only_tenant_is_checked():
    typ, props = slice_pod("p", mem=90000)
    del props["metadata"]["labels"]
    config = {"tenants": [TEAM_A]}
    assert run_resource("gpu-request-fits-one-card", typ, props, config)
    assert run_resource("gpu-tenant-known", typ, props, config) == []


# --- fail closed: what cannot be attributed to a configured quota is refused -----------------


def test_unattributable_object_in_a_multi_tenant_stack_is_refused():
    typ, props = slice_pod("p")
    del props["metadata"]["labels"]
    (msg,) = run_resource("gpu-tenant-known", typ, props)
    assert (
        "cannot tell which tenant's cluster the default provider reaches at preview (configured: team-a, team-b)" in msg
    )
    assert POLICY["gpu-tenant-known"].enforcement_level == EnforcementLevel.MANDATORY


def test_no_quota_configured_is_refused():
    gt.STACK_CONFIG.clear()
    typ, props = slice_pod("p")
    (msg,) = run_resource("gpu-tenant-known", typ, props, config={})
    assert "no tenant quota is configured" in msg and "--policy-pack-config" in msg
    assert run_resource("gpu-tenant-known", *obj("Pod", "cpu", pod_spec(container({"cpu": "1"}))), config={}) == []


def test_label_naming_an_unconfigured_tenant_is_refused_even_with_one_tenant():
    typ, props = slice_pod("p", tenant="team-z")
    (msg,) = run_resource("gpu-tenant-known", typ, props, config={"tenants": [TEAM_A]})
    assert "gpu-tenancy/tenant=team-z, a tenant with no quota configured (configured: team-a)" in msg


def kubeconfig(server: str) -> str:
    return (
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n"
    )


@pytest.mark.parametrize(
    "via",
    [
        provider("team-a"),  # the cluster input the program's tenant providers set
        provider("anything", {"kubeconfig": kubeconfig("https://172.30.0.2:31443")}),  # a known kubeconfig
        provider("team-b-cp-k8s", {"kubeconfig": kubeconfig("https://172.30.0.2:31443")}),  # the name does not count
    ],
)
def test_a_label_cannot_move_usage_to_another_tenants_quota(via):
    typ, props = slice_pod("p", tenant="team-b")
    (msg,) = run_resource("gpu-tenant-known", typ, props, via=via)
    assert "labelled gpu-tenancy/tenant=team-b but created through provider" in msg
    assert "reaches tenant team-a's API server (172.30.0.2:31443)" in msg
    assert run_resource("gpu-tenant-known", typ, props, via=provider("team-b")) == []


@pytest.mark.parametrize(
    ("via", "said"),
    [
        (provider("x"), "cannot tell which tenant's cluster provider 'x' reaches"),
        (None, "cannot tell which tenant's cluster the default provider reaches"),
        (provider("team-b-cp-k8s", {}), "cannot tell which tenant's cluster provider 'team-b-cp-k8s'"),
        (provider("y", {"kubeconfig": kubeconfig("https://10.9.9.9:6443")}), "reaches 10.9.9.9:6443: the API server"),
    ],
)
def test_a_labelled_object_through_an_unknown_cluster_is_refused(via, said):
    typ, props = slice_pod("p", tenant="team-b")
    (msg,) = run_resource("gpu-tenant-known", typ, props, via=via)
    assert said in msg


def test_the_provider_attributes_an_unlabelled_object():
    typ, props = slice_pod("p", mem=24000)
    del props["metadata"]["labels"]
    (msg,) = run_resource("gpu-request-fits-one-card", typ, props, via=provider("team-b"))
    assert msg.startswith("tenant team-b:") and "exceeds one NVIDIA L4 24GB card" in msg


def test_invalid_tenant_config_is_refused_not_ignored():
    bad = {"tenants": [{**TEAM_A, "quota": {"gpus": 0, "gpumemMb": 81920, "gpucoresPercent": 100}}]}
    (msg,) = run_resource("gpu-tenant-known", *slice_pod("p"), config=bad)
    assert "are invalid" in msg and "gpu-tenancy:tenants[0].quota.gpus: must be 1-" in msg


def test_two_whole_card_containers_of_one_pod_are_not_split_across_nodes():
    two_nodes = {
        "tenants": [
            {
                **TEAM_A,
                "pools": [{"name": "worker", "nodes": 2}],
                "quota": {"gpus": 20, "gpumemMb": 163840, "gpucoresPercent": 200},
            }
        ]
    }
    pair = obj(
        "Pod", "pair", pod_spec(container({"nvidia.com/gpu": "1"}, "a"), container({"nvidia.com/gpu": "1"}, "b"))
    )
    (msg,) = run_resource("gpu-request-fits-one-card", *pair, config=two_nodes)
    assert "a pod's containers all run on one node" in msg
    (fit,) = run_stack("gpu-fleet-fit", [pair], config=two_nodes)
    assert "Pod pair[0] cannot be placed" in fit


def test_declared_may_stay_pending_counts_for_quota_but_not_fit():
    typ, props = slice_pod("waits", mem=20000, cores=30)
    props["metadata"]["annotations"] = {"gpu-tenancy/fail-on-pending": "false"}
    pods = [slice_pod(f"p{i}") for i in range(3)] + [(typ, props)]
    assert run_stack("gpu-fleet-fit", pods) == []
    (msg,) = run_stack("gpu-quota-per-tenant", pods)
    assert "gpucores % 120 > quota 100" in msg


def test_unknown_replicas_count_as_one_and_are_said():
    from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, unknown_checking_proxy

    typ, props = obj(
        "Deployment", "d", pod_spec(container({"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"})), replicas=9
    )
    props["spec"]["replicas"] = UNKNOWN_NUMBER_VALUE
    props = unknown_checking_proxy(props)
    w = go.workload_of(typ, props, "d")
    assert w.replicas == 1 and w.unknown == ["spec.replicas"]
    (said,) = run_resource("gpu-values-unknown-at-preview", typ, props)
    assert "unknown spec.replicas (counted at the least it can be: one replica" in said
    pods = [slice_pod(f"p{i}") for i in range(3)] + [(typ, props)]
    (msg,) = run_stack("gpu-quota-per-tenant", pods)
    # One replica at least, and the default rollout's surge (25 % of one, rounded up): 3 + 2 pods.
    assert (
        "gpucores % 150 > quota 100" in msg
        and "Deployment d (values unknown at preview, counted at their least) x1 +1 surge" in msg
    )


def test_an_unknown_strategy_counts_at_its_least_and_is_said():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    typ, props = obj("Deployment", "d", pod_spec(container({"nvidia.com/gpucores": "30"})), replicas=3)
    props["spec"]["strategy"] = {"type": UNKNOWN_STRING_VALUE}
    w = go.workload_of(typ, unknown_checking_proxy(props), "d")
    demand = gt.demand_of(w, gt.tenants_for(CONFIG).by_name["team-a"], lambda _m: None)
    assert demand.surge == 0 and "strategy" in " ".join(w.unknown)


# --- stack policies: quota sums and fleet fit -------------------------------------------------


def test_reference_lab_three_slices_fit_one_a100():
    pods = [slice_pod(f"p{i}") for i in range(3)]
    assert run_stack("gpu-quota-per-tenant", pods) == []
    assert run_stack("gpu-fleet-fit", pods) == []


def test_reference_lab_fourth_30_percent_pod_does_not_fit():
    pods = [slice_pod(f"p{i}") for i in range(4)]
    (quota,) = run_stack("gpu-quota-per-tenant", pods)
    assert "tenant team-a is over its GPU quota: gpucores % 120 > quota 100" in quota
    (fit,) = run_stack("gpu-fleet-fit", pods)
    assert fit.startswith("tenant team-a: Pod p3[0] cannot be placed")


def test_90000_mb_pod_cannot_be_placed():
    (fit,) = run_stack("gpu-fleet-fit", [slice_pod("huge", mem=90000)])
    assert "Pod huge[0]" in fit and "81920 MB" in fit


def test_deployment_replicas_count_against_quota():
    ok = obj(
        "Deployment", "d", pod_spec(container({"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "20"})), replicas=4
    )
    # The API's default rollout surges one pod (25 % of 4): five 20000 MB pods do not fit the budget.
    (msg,) = run_stack("gpu-quota-per-tenant", [ok])
    assert "gpumem MB 100000 > quota 81920" in msg and "Deployment d x4 +1 surge" in msg
    ok[1]["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert run_stack("gpu-quota-per-tenant", [ok]) == []
    over = obj(
        "Deployment", "d", pod_spec(container({"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "10"})), replicas=5
    )
    (msg,) = run_stack("gpu-quota-per-tenant", [over])
    assert "gpumem MB 140000 > quota 81920" in msg and "Deployment d x5 +2 surge" in msg  # 25 % of 5, up


def test_whole_card_pods_on_the_l4_node():
    whole = [obj("Pod", f"w{i}", pod_spec(container({"nvidia.com/gpu": "1"})), "team-b") for i in range(4)]
    assert run_stack("gpu-fleet-fit", whole) == []
    fifth = [*whole, obj("Pod", "w4", pod_spec(container({"nvidia.com/gpu": "1"})), "team-b")]
    (msg,) = run_stack("gpu-fleet-fit", fifth)
    assert "tenant team-b" in msg and "w4" in msg


def test_whole_card_and_a_slice_do_not_share_one_a100():
    pods = [obj("Pod", "whole", pod_spec(container({"nvidia.com/gpu": "1"}))), slice_pod("s", mem=1000, cores=0)]
    (msg,) = run_stack("gpu-fleet-fit", pods)
    assert "cannot be placed" in msg


def test_tenants_are_summed_apart():
    pods = [slice_pod(f"a{i}") for i in range(3)] + [
        slice_pod(f"b{i}", mem=20000, cores=90, tenant="team-b") for i in range(4)
    ]
    assert run_stack("gpu-quota-per-tenant", pods) == []
    assert run_stack("gpu-fleet-fit", pods) == []


# --- through the analyzer servicer: proxies, floats, unknowns, config -------------------------


def analyze(props: dict, typ: str = "kubernetes:core/v1:Pod") -> list[tuple[str, str]]:
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    servicer = _PolicyAnalyzerServicer("gpu-quotas", "0.1.0", gp.POLICIES, EnforcementLevel.MANDATORY)
    cfg = struct_pb2.Struct()
    cfg.update(CONFIG)
    servicer.Configure(
        proto.ConfigureAnalyzerRequest(
            policyConfig={
                p.name: proto.PolicyConfig(enforcementLevel=proto.MANDATORY, properties=cfg) for p in gp.POLICIES
            }
        ),
        None,
    )
    s = struct_pb2.Struct()
    s.update(props)
    reach = struct_pb2.Struct()
    reach.update({"cluster": ENDPOINTS["team-a"]})
    via = proto.AnalyzerProviderResource(
        type="pulumi:providers:kubernetes", properties=reach, urn="urn:p", name="team-a"
    )
    request = proto.AnalyzeRequest(type=typ, properties=s, urn="urn:pulumi:s::p::t::x", name="x", provider=via)
    resp = servicer.Analyze(request, None)
    return [(d.policyName, d.message) for d in resp.diagnostics]


def test_servicer_numbers_arrive_as_floats_and_still_pass():
    _, props = slice_pod("p")
    props["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}
    assert analyze(props) == []


def test_servicer_reports_a_misfit():
    _, props = slice_pod("p", mem=90000)
    (diag,) = analyze(props)
    assert diag[0] == "gpu-request-fits-one-card" and "90000 MB" in diag[1]


def test_servicer_unknown_value_is_reported_openly():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    _, props = slice_pod("p")
    props["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = UNKNOWN_STRING_VALUE
    diags = analyze(props)
    assert any(name == "gpu-values-unknown-at-preview" and "could not check Pod p" in msg for name, msg in diags), diags


def test_quotas_come_from_the_stack_config_when_the_pack_has_none():
    import json

    from pulumi_policy.policy import _PolicyAnalyzerServicer

    gt.receive_stack_config()
    tenants = [
        {
            "name": "team-a",
            "pools": [{"name": "worker", "nodes": 1}],
            "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
            "quota": {"gpus": 10, "gpumemMb": 81920, "gpucoresPercent": 100},
        }
    ]
    servicer = _PolicyAnalyzerServicer("gpu-quotas", "0.1.0", gp.POLICIES, EnforcementLevel.MANDATORY)
    servicer.ConfigureStack(
        proto.AnalyzerStackConfigureRequest(config={"gpu-tenancy:tenants": json.dumps(tenants)}), None
    )
    try:
        pods = [slice_pod(f"p{i}") for i in range(4)]
        (msg,) = run_stack("gpu-quota-per-tenant", pods, config={})
        assert "gpucores % 120 > quota 100" in msg
    finally:
        gt.STACK_CONFIG.clear()
    (refused,) = run_resource("gpu-tenant-known", *pods[0], config={})
    assert "no tenant quota is configured" in refused


# --- stack policy: the closed-network keys, in the config check's own words -----------------


@pytest.mark.parametrize(
    "keys",
    [
        {"mirror": {"endpoint": "http://172.17.0.1:5000/v2"}},
        {"mirror": {"endpoint": "http://m:5000", "registries": ["bad/host"]}, "images": {"k3s": "rancher/k3s"}},
        {"charts": {"hami": "oci://172.17.0.1:5000/charts/hami", "kamaji": "/nonexistent/kamaji"}},
    ],
)
def test_the_pack_refuses_a_closed_network_key_in_the_config_checks_words(keys):
    import json

    from components.config.load import load_stack_config
    from components.config.problems import ConfigError

    gt.STACK_CONFIG.clear()
    gt.STACK_CONFIG.update({f"gpu-tenancy:{k}": json.dumps(v) for k, v in keys.items()})
    try:
        found = run_stack("closed-network-sources", [])
    finally:
        gt.STACK_CONFIG.clear()
    with pytest.raises(ConfigError) as exc:
        load_stack_config("gpu-tenancy", {"tenants": CONFIG["tenants"], **keys}, base=gt.PROJECT_DIR)
    said = [f"{key}: {msg}" for key, msg in exc.value.problems]
    assert found and sorted(found) == sorted(said)
    assert POLICY["closed-network-sources"].enforcement_level == EnforcementLevel.MANDATORY


def test_the_pack_passes_a_stack_without_closed_network_keys():
    gt.STACK_CONFIG.clear()
    assert run_stack("closed-network-sources", []) == []
