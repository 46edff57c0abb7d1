"""The gpu-quotas pack through the real engine: `pulumi preview --policy-pack policy` on small
programs whose GPU Pods/Deployments are previewed against the real kube-apiserver."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.policy.test_gpu_policies import TEAM_A
from tests.unit.harness import load_config_file

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).parent / "programs" / "gpu_pods"
PACK_CONFIG = {"tenants": [TEAM_A]}
POLICIES = (
    "gpu-tenant-known",
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


@pytest.fixture
def program(pulumi_cli, cluster, tmp_path):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("the policy pack runs in the project's .venv (PulumiPolicy.yaml); run scripts/setup-venv.sh")
    work = tmp_path / "program"
    shutil.copytree(PROGRAM, work)
    pulumi_cli("stack", "init", "test", cwd=work)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=work)
    cfg = tmp_path / "policy-config.json"
    cfg.write_text(json.dumps({name: PACK_CONFIG for name in POLICIES}))

    def preview(
        workloads: list[dict], with_config: bool = True, extra_config: dict | None = None, pack: dict = PACK_CONFIG
    ):
        pulumi_cli("config", "set", "workloads", json.dumps(workloads), cwd=work)
        cfg.write_text(json.dumps({name: pack for name in POLICIES}))
        if extra_config:
            stack_file = work / "Pulumi.test.yaml"
            doc = yaml.safe_load(stack_file.read_text())
            doc["config"].update(extra_config)
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
    assert "gpumem MB 100000 > quota 81920" in result.stdout


def test_dev_stack_quotas_and_workloads_pass_from_the_stack_config(program):
    """No --policy-pack-config: the pack reads the quotas from the stack's own config (here the
    dev stack's tenants), and the dev stack's declared workloads pass."""
    dev = load_config_file(ROOT / "Pulumi.dev.yaml")
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
                }
            )
    assert len(workloads) == 2
    tenants = {"gpu-tenancy:tenants": dev["gpu-tenancy:tenants"]}
    result = program(workloads, with_config=False, extra_config=tenants)
    assert result.returncode == 0, result.stdout + result.stderr
    # and the same config with one replica too many is refused
    workloads[0]["replicas"] = 4
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
