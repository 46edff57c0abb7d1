"""The runtime twin of the GPU quota, through the real engine and the real API server with
kube-controller-manager's resourcequota controller: one budget split over the namespaces (never
multiplied), an over-budget pod refused, a GPU pod outside the budget's namespaces refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from tests.support.cluster import start_cluster
from tests.support.tools import require
from tests.support.waits import settles

PROGRAM = Path(__file__).parent / "programs" / "gpu_quota"
pytestmark = pytest.mark.integration
BUDGET = {"gpus": 10, "gpumem_mb": 81920, "gpucores": 100}


@pytest.fixture(scope="module")
def quota_cluster(tools):
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    cluster = start_cluster(tools)
    cluster.start_controller_manager(["resourcequota", "namespace", "garbagecollector"])
    yield cluster
    cluster.stop()


def gpu_pod(name: str, mem: int, cores: int) -> dict:
    limits = {ha.RES_GPUMEM: str(mem), ha.RES_GPUCORES: str(cores)}
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": ha.SCHEDULER_NAME,  # as HAMi's webhook leaves it
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
        },
    }


def create(core, ns: str, body: dict, timeout: float = 30) -> client.ApiException | None:
    """Create the pod; None when admitted, the API's refusal otherwise (waits for the quota's
    first status, without which the API server admits everything)."""
    answer: dict[str, client.ApiException | None] = {}

    def decided() -> bool:
        try:
            core.create_namespaced_pod(ns, body)
            answer["refusal"] = None
        except client.ApiException as exc:
            answer["refusal"] = exc
            return "status unknown for quota" not in str(exc.body)
        return True

    settles(decided, timeout=timeout)
    return answer["refusal"]


def wait_quota_status(core, ns: str) -> None:
    def computed() -> bool:
        q = core.read_namespaced_resource_quota("gpu-quota", ns)
        return bool(q.status and q.status.hard)

    if settles(computed, timeout=60):
        return
    raise AssertionError(f"resourcequota controller never computed {ns}/gpu-quota")


def budget_policy_refuses(core, ns: str) -> bool:
    """True once the budget's admission policy refuses a GPU pod in `ns` (a dry run; the API
    server compiles a new or changed policy in a moment)."""

    def refused() -> bool:
        try:
            core.create_namespaced_pod(ns, gpu_pod("probe", 1000, 1), dry_run="All")
        except client.ApiException as exc:
            return "GPU pods run only in the namespaces that hold a share" in str(exc.body)
        return False

    return settles(refused, timeout=30)


def quota_stack(pulumi_cli, cluster, tmp_path) -> Path:
    """The GpuQuota program as a stack on the cluster, with the test budget."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAM, work)
    pulumi_cli("stack", "init", "test", cwd=work)
    pulumi_cli("config", "set", "--secret", "kubeconfig", cluster.kubeconfig_text, cwd=work)
    pulumi_cli("config", "set", "budget", json.dumps(BUDGET), cwd=work)
    return work


def test_one_budget_split_and_enforced(pulumi_cli, quota_cluster, tmp_path):
    work = quota_stack(pulumi_cli, quota_cluster, tmp_path)
    declared = {"inference": {"gpus": 1, "gpumem_mb": 20000, "gpucores": 30}}
    pulumi_cli("config", "set", "declared", json.dumps(declared), cwd=work)
    try:
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        shares = json.loads(pulumi_cli("stack", "output", "shares", "--json", cwd=work).stdout)
        assert shares == {"default": [9, 61920, 70], "inference": [1, 20000, 30]}
        assert [sum(s[i] for s in shares.values()) for i in range(3)] == [10, 81920, 100]  # never more
        core = quota_cluster.core()
        for ns in shares:
            wait_quota_status(core, ns)
        # within the inference share, then one slice more
        assert create(core, "inference", gpu_pod("fits", 20000, 30)) is None
        refused = create(core, "inference", gpu_pod("over", 1000, 1))
        assert refused is not None and refused.status == 403 and "exceeded quota: gpu-quota" in refused.body
        # default holds the rest: 61920 MB, not the whole budget again
        assert create(core, "default", gpu_pod("d1", 60000, 50)) is None
        refused = create(core, "default", gpu_pod("d2", 20000, 10))
        assert refused is not None and "exceeded quota" in refused.body and "nvidia.com/gpumem" in refused.body
        # a namespace without a share cannot open a second budget
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="elsewhere")))
        assert budget_policy_refuses(core, "elsewhere"), "the budget's admission policy was never enforced"
        refused = create(core, "elsewhere", gpu_pod("sneaky", 1000, 1))
        assert refused is not None and refused.status in (403, 422)
        assert "GPU pods run only in the namespaces that hold a share" in refused.body
        assert (
            create(
                core, "elsewhere", {"metadata": {"name": "cpu"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
            )
            is None
        )
        pulumi_cli("preview", "--expect-no-changes", cwd=work)
    finally:
        pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, timeout=180)


def test_a_removed_workload_namespace_keeps_what_the_team_made_there(pulumi_cli, quota_cluster, tmp_path):
    """Removing the last workload of a namespace removes its share, its quota and its place in
    the policy, never the namespace (the namespace controller runs here: a deleted namespace
    would take its objects with it); declaring it again adopts the namespace."""
    work = quota_stack(pulumi_cli, quota_cluster, tmp_path)
    train = {"gpus": 1, "gpumem_mb": 20000, "gpucores": 30}
    serve = {"gpus": 1, "gpumem_mb": 10000, "gpucores": 20}
    core = quota_cluster.core()
    try:
        pulumi_cli("config", "set", "declared", json.dumps({"train": train, "serve": serve}), cwd=work)
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        core.create_namespaced_config_map("train", {"metadata": {"name": "notes"}, "data": {"by": "hand"}})

        pulumi_cli("config", "set", "declared", json.dumps({"serve": serve}), cwd=work)
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        ns = core.read_namespace("train")
        assert ns.status.phase == "Active" and ns.metadata.deletion_timestamp is None
        assert core.read_namespaced_config_map("notes", "train").data == {"by": "hand"}
        assert not core.list_namespaced_resource_quota("train").items  # its share went
        shares = json.loads(pulumi_cli("stack", "output", "shares", "--json", cwd=work).stdout)
        assert shares == {"default": [9, 71920, 80], "serve": [1, 10000, 20]}  # back to default
        assert budget_policy_refuses(core, "train"), "a GPU pod was still admitted in the removed namespace"

        pulumi_cli("config", "set", "declared", json.dumps({"train": train, "serve": serve}), cwd=work)
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)  # the namespace is adopted again
        wait_quota_status(core, "train")
        assert core.read_namespaced_config_map("notes", "train").data == {"by": "hand"}
        pulumi_cli("preview", "--expect-no-changes", cwd=work)
    finally:
        pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, timeout=180)
