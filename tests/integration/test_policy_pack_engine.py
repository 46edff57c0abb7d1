"""The gpu-quotas pack through the real engine: `pulumi preview --policy-pack policy` on small
programs whose GPU Pods/Deployments are previewed against the real kube-apiserver."""

from __future__ import annotations

import json
import random
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.config.load import load_stack_file
from tests.support.harness import load_config_file
from tests.support.policy_pack import TEAM_A, TEAM_B
from tests.support.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).parent / "programs" / "gpu_pods"
POLICIES = (
    "gpu-tenant-known",
    "gpu-usage-countable",
    "gpu-request-fits-one-card",
    "gpu-values-unknown-at-preview",
    "gpu-quota-per-tenant",
    "gpu-fleet-fit",
)

pytestmark = pytest.mark.integration


def slice_pod(name: str, mem: int = 20000, cores: int = 30) -> dict:
    return {
        "name": name,
        "tenant": "team-a",
        "limits": {"nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)},
    }


def node_port() -> int:
    """A free loopback port in the NodePort range (where tenants' API servers listen)."""
    for _ in range(200):
        port = random.randint(30000, 32767)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in the NodePort range")


@pytest.fixture(scope="module")
def tenant_endpoints(cluster):
    """Each tenant's API server as the pack knows it (127.0.0.1:<NodePort>): a forwarder to the
    test API server per tenant, so the pack attributes by the cluster a provider reaches."""
    proxies = {name: TcpProxy(cluster.port, node_port()) for name in ("team-a", "team-b")}
    ext = client.ApiextensionsV1Api(cluster.api_client())
    ext.create_custom_resource_definition(PYTORCH_CRD)
    yield {name: (p.port, p.kubeconfig(cluster.kubeconfig_text, cluster.port)) for name, p in proxies.items()}
    ext.delete_custom_resource_definition(PYTORCH_CRD["metadata"]["name"])
    for p in proxies.values():
        p.close()


PYTORCH_CRD = {
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "names": {"kind": "PyTorchJob", "plural": "pytorchjobs", "singular": "pytorchjob"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: trainer\nversion: 0.1.0\n",
    "values.yaml": "resources: {}\n",
    "templates/pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer}\nspec:\n  containers:\n"
    "  - name: t\n    image: busybox\n    resources: {{- toYaml .Values.resources | nindent 6 }}\n",
}


def with_port(tenant: dict, port: int) -> dict:
    return {**tenant, "apiPort": port}


@pytest.fixture
def program(pulumi_cli, tenant_endpoints, tmp_path):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("the policy pack runs in the project's .venv (PulumiPolicy.yaml); run scripts/setup-venv.sh")
    work = tmp_path / "program"
    shutil.copytree(PROGRAM, work)
    chart = tmp_path / "chart"
    for name, text in CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    pulumi_cli("stack", "init", "test", cwd=work)
    pulumi_cli("config", "set", "clusters", json.dumps(list(tenant_endpoints)), cwd=work)
    pulumi_cli("config", "set", "chart", str(chart), cwd=work)
    pulumi_cli("config", "set", "gpu-tenancy:cluster", json.dumps({"managementIp": "127.0.0.1"}), cwd=work)
    for name, (_, kubeconfig) in tenant_endpoints.items():
        pulumi_cli("config", "set", "--secret", f"kubeconfig-{name}", kubeconfig, cwd=work)
    ports = {name: port for name, (port, _) in tenant_endpoints.items()}
    default_pack = {"tenants": [with_port(TEAM_A, ports["team-a"])]}
    cfg = tmp_path / "policy-config.json"

    def preview(
        workloads: list[dict], with_config: bool = True, extra_config: dict | None = None, pack: dict | None = None
    ):
        pulumi_cli("config", "set", "workloads", json.dumps(workloads), cwd=work)
        given = pack or default_pack
        given = {"tenants": [with_port(t, ports.get(t["name"], 31999)) for t in given["tenants"]]}
        cfg.write_text(json.dumps({name: given for name in POLICIES}))
        if extra_config:
            stack_file = work / "Pulumi.test.yaml"
            doc = yaml.safe_load(stack_file.read_text())
            extra = dict(extra_config)
            if "gpu-tenancy:tenants" in extra:
                extra["gpu-tenancy:tenants"] = [
                    with_port(t, ports.get(t["name"], 31999)) for t in extra["gpu-tenancy:tenants"]
                ]
            doc["config"].update(extra)
            stack_file.write_text(yaml.safe_dump(doc))
        args = ["preview", "--diff", "--policy-pack", str(ROOT / "policy")]
        if with_config:
            args += ["--policy-pack-config", str(cfg)]
        return pulumi_cli(*args, cwd=work, check=False)

    return preview


def test_within_quota_passes(program):
    result = program([slice_pod(f"p{i}") for i in range(3)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_over_quota_fails_naming_the_policy(program):
    result = program([slice_pod(f"p{i}") for i in range(4)])
    assert result.returncode != 0
    assert "gpu-quota-per-tenant" in result.stdout
    assert "gpucores % 120 > quota 100" in result.stdout


def test_request_larger_than_a_card_fails(program):
    result = program([slice_pod("huge", mem=90000)])
    assert result.returncode != 0
    assert "gpu-request-fits-one-card" in result.stdout
    assert "90000 MB exceeds one NVIDIA A100 80GB card (81920 MB)" in result.stdout


def test_deployment_replicas_are_counted(program):
    over = {
        "name": "d",
        "kind": "Deployment",
        "replicas": 5,
        "tenant": "team-a",
        "limits": {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "10"},
    }
    result = program([over])
    assert result.returncode != 0
    # no strategy: Kubernetes' default surge, 25 % of 5 rounded up, is counted too
    assert "gpumem MB 140000 > quota 81920" in result.stdout and "Deployment d x5 +2 surge" in result.stdout


def test_dev_stack_quotas_and_workloads_pass_from_the_stack_config(program):
    """No --policy-pack-config: the pack reads the quotas from the stack's own config (here the
    dev stack's tenants), and the dev stack's declared workloads pass."""
    dev = load_config_file(ROOT / "Pulumi.dev.yaml")
    # each workload's rollout strategy as the program sets it on its Deployment
    strategies = {w.name: w.strategy for t in load_stack_file(ROOT / "Pulumi.dev.yaml").tenants for w in t.workloads}
    workloads = []
    for t in dev["gpu-tenancy:tenants"]:
        for w in t.get("workloads", []):
            limits = {
                k: str(w[f])
                for k, f in (
                    ("nvidia.com/gpu", "gpus"),
                    ("nvidia.com/gpumem", "gpumemMb"),
                    ("nvidia.com/gpucores", "gpucoresPercent"),
                )
                if f in w
            }
            workloads.append(
                {
                    "name": w["name"],
                    "kind": w.get("kind", "Pod"),
                    "replicas": w.get("replicas", 1),
                    "tenant": t["name"],
                    "limits": limits,
                    **({"spec": {"strategy": strategies[w["name"]]}} if w.get("kind") == "Deployment" else {}),
                }
            )
    assert len(workloads) == 2
    tenants = {"gpu-tenancy:tenants": dev["gpu-tenancy:tenants"]}
    result = program(workloads, with_config=False, extra_config=tenants)
    assert result.returncode == 0, result.stdout + result.stderr
    # and the same config with one replica too many for team-a's one card is refused ...
    workloads[0]["replicas"] = 4
    result = program(workloads, with_config=False, extra_config=tenants)
    assert result.returncode != 0 and "cannot be placed on its fleet" in result.stdout
    # ... and with more than its budget (two cards' worth: 7 x 30 % > 200 %) too
    workloads[0]["replicas"] = 7
    result = program(workloads, with_config=False, extra_config=tenants)
    assert result.returncode != 0 and "tenant team-a is over its GPU quota" in result.stdout


def test_no_quota_configured_fails_closed(program):
    result = program([slice_pod("p")], with_config=False)
    assert result.returncode != 0
    assert "gpu-tenant-known" in result.stdout and "no tenant quota is configured" in result.stdout


def test_label_naming_an_unconfigured_tenant_fails(program):
    pod = {**slice_pod("p"), "tenant": "team-z"}
    result = program([pod])
    assert result.returncode != 0
    assert "gpu-tenancy/tenant=team-z, a tenant with no quota configured" in result.stdout


def test_two_container_pod_that_fits_only_when_split_fails(program):
    two_nodes = {
        "tenants": [
            {
                **TEAM_A,
                "pools": [{"name": "worker", "nodes": 2}],
                "quota": {"gpus": 20, "gpumemMb": 163840, "gpucoresPercent": 200},
            }
        ]
    }
    whole = {"nvidia.com/gpu": "1"}
    pair = {
        "name": "pair",
        "tenant": "team-a",
        "containers": [{"name": "a", "limits": whole}, {"name": "b", "limits": whole}],
    }
    result = program([pair], pack=two_nodes)
    assert result.returncode != 0
    assert "gpu-request-fits-one-card" in result.stdout and "a pod's containers all run on one node" in result.stdout
    assert "gpu-fleet-fit" in result.stdout
    # the same two containers as two pods fit: one whole card on each node
    apart = [{"name": f"one-{c}", "tenant": "team-a", "limits": whole} for c in "ab"]
    result = program(apart, pack=two_nodes)
    assert result.returncode == 0, result.stdout + result.stderr


CARD = {"nvidia.com/gpu": "1"}  # a whole A100; team-a's quota is one card's memory and cores


@pytest.mark.parametrize(
    "kind", ["ReplicationController", "StatefulSet", "Job", "CronJob", "DaemonSet", "PyTorchJob", "HelmRelease"]
)
def test_every_kind_is_counted_or_refused(program, kind):
    """Over budget in each kind: refused, by the quota (counted kinds) or as uncounted."""
    w = {"name": "w", "kind": kind, "tenant": "team-a", "limits": CARD, "replicas": 2}
    if kind == "CronJob":
        w["spec"] = {"concurrencyPolicy": "Forbid"}
    if kind == "DaemonSet":
        w["limits"] = {"nvidia.com/gpu": "2"}  # two cards per pod on a one-card node
    if kind == "HelmRelease":
        w["values"] = {"resources": {"limits": {"nvidia.com/gpu": 4}}}
    result = program([w])
    assert result.returncode != 0, result.stdout
    said = {
        "PyTorchJob": "gpu-usage-countable",
        "HelmRelease": "gpu-usage-countable",
        "DaemonSet": "gpu-request-fits-one-card",
    }.get(kind, "gpu-quota-per-tenant")
    assert said in result.stdout, result.stdout


@pytest.mark.parametrize("kind", ["PyTorchJob", "HelmRelease"])
def test_an_uncounted_kind_passes_once_declared_within_budget(program, kind):
    usage = {"gpus": 1, "gpumemMb": 20000, "gpucoresPercent": 30}
    w = {"name": "w", "kind": kind, "tenant": "team-a", "limits": CARD}
    if kind == "HelmRelease":
        w["values"] = {"resources": {"limits": {"nvidia.com/gpu": 1}}, "gpu-tenancy/gpu-usage": usage}
    else:
        w["annotations"] = {"gpu-tenancy/gpu-usage": json.dumps(usage)}
    result = program([w])
    assert result.returncode == 0, result.stdout + result.stderr
    over = json.dumps({**usage, "gpucoresPercent": 300})
    if kind == "HelmRelease":
        w["values"]["gpu-tenancy/gpu-usage"] = json.loads(over)
    else:
        w["annotations"] = {"gpu-tenancy/gpu-usage": over}
    result = program([w])
    assert result.returncode != 0 and "gpucores % 300 > quota 100" in result.stdout, result.stdout
    assert "declares more than its GPU quota" in result.stdout or "over its GPU quota" in result.stdout


def test_a_cronjob_whose_jobs_may_overlap_is_refused(program):
    result = program([{"name": "nightly", "kind": "CronJob", "tenant": "team-a", "limits": CARD}])
    assert result.returncode != 0 and "concurrencyPolicy" in result.stdout, result.stdout


def test_a_team_b_label_through_team_a_cluster_is_refused(program):
    both = {"tenants": [TEAM_A, TEAM_B]}
    pod = {**slice_pod("p"), "tenant": "team-b", "via": "team-a"}
    result = program([pod], pack=both)
    assert result.returncode != 0
    assert "labelled gpu-tenancy/tenant=team-b but created through provider" in result.stdout
    assert "reaches tenant team-a's API server" in result.stdout
    result = program([{**pod, "via": "team-b"}], pack=both)
    assert result.returncode == 0, result.stdout + result.stderr


MIXED_TEAM_A = {
    "name": "team-a",
    "pools": [
        {"name": "worker", "mode": "docker", "nodes": 1},
        {"name": "a100", "mode": "kwok", "nodes": 1, "gpu": {"model": "A100-80GB", "cardsPerNode": 1}},
        {"name": "l4", "mode": "kwok", "nodes": 1, "gpu": {"model": "L4", "cardsPerNode": 2}},
    ],
    "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
    "quota": {"gpus": 30, "gpumemMb": 500000, "gpucoresPercent": 300},
}


def on_cards(name: str, replicas: int, use: str | None = None, nouse: str | None = None, mem: int = 5000) -> dict:
    """A Deployment of 5000 MB / 25 % slices, its pods choosing card types as HAMi reads them."""
    annotations = {k: v for k, v in (("nvidia.com/use-gputype", use), ("nvidia.com/nouse-gputype", nouse)) if v}
    return {
        "name": name,
        "kind": "Deployment",
        "replicas": replicas,
        "tenant": "team-a",
        "spec": {"strategy": {"type": "Recreate"}},
        "podAnnotations": annotations,
        "limits": {"nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": "25"},
    }


def test_a_mixed_fleet_is_judged_pool_by_pool_with_the_pods_card_types(program):
    """An A100 node and an L4 node of two cards: 4 slices of 25 % per card, by cores."""
    pack = {"tenants": [MIXED_TEAM_A]}
    result = program([on_cards("serve", 8, use="L4")], pack=pack)
    assert result.returncode == 0, result.stdout + result.stderr  # the two L4 cards, full
    # nine on L4 do not fit, though the A100 has room: the pods may not use it
    result = program([on_cards("serve", 9, use="L4")], pack=pack)
    assert result.returncode != 0 and "gpu-fleet-fit" in result.stdout, result.stdout
    assert "Deployment serve[8]" in result.stdout, result.stdout
    assert program([on_cards("serve", 12)], pack=pack).returncode == 0  # without a type: both pools
    # no card of an allowed type at all: refused per object, with HAMi's code
    result = program([on_cards("train", 1, use="H100")], pack=pack)
    assert result.returncode != 0 and "gpu-request-fits-one-card" in result.stdout, result.stdout
    assert "nvidia.com/use-gputype 'H100' allows no card of the fleet" in result.stdout
    assert "CardTypeMismatch" in result.stdout
    # 30000 MB fits an A100 only: refused when the pod avoids it
    result = program([on_cards("big", 1, nouse="A100", mem=30000)], pack=pack)
    assert result.returncode != 0 and "exceeds one NVIDIA L4 24GB card (23034 MB)" in result.stdout, result.stdout
    assert program([on_cards("big", 1, mem=30000)], pack=pack).returncode == 0
