"""Ways around the GPU budget, tried on a real kube-apiserver with the budget's admission policy
(components/tenant/gpu_quota.py) bound to every namespace: each is refused with a message naming
the rule; a GPU pod as HAMi's webhook leaves it, in a budget namespace, and any CPU pod pass."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from components.domain.names import GPU_BUDGET_LABEL
from components.tenant.gpu_quota import POLICY_NAME, budget_policy_spec
from tests.support.cluster import start_cluster
from tests.support.tools import require
from tests.support.waits import settles

pytestmark = pytest.mark.integration
SHARES = ["default", "inference"]
BUDGET = {GPU_BUDGET_LABEL[0]: GPU_BUDGET_LABEL[1]}


def pod(
    name: str,
    gpu: dict[str, str] | None = None,
    scheduler: str | None = ha.SCHEDULER_NAME,
    init_gpu: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    privileged: bool = False,
    node: str | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x"}
    if gpu:
        container["resources"] = {"limits": gpu}
    if privileged:
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {"containers": [container]}
    if init_gpu:
        spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": init_gpu}}]
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


SLICE = {ha.RES_GPUMEM: "20000", ha.RES_GPUCORES: "30"}


def refusal(core: Any, ns: str, body: dict[str, Any]) -> str:
    """'' when the pod is admitted (dry run), the API server's message otherwise."""
    try:
        core.create_namespaced_pod(ns, body, dry_run="All")
        return ""
    except client.ApiException as exc:
        return f"{exc.status} {exc.body}"


@pytest.fixture(scope="module")
def budget(tools):
    """Its own API server, allowing privileged containers as a tenant's does."""
    require(tools, "kube-apiserver", "etcd", "openssl")
    cluster = start_cluster(tools, api_args=["--allow-privileged=true"])
    core = cluster.core()
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    core.patch_namespace("default", {"metadata": {"labels": BUDGET}})
    for ns, labels in (("inference", BUDGET), ("sneaky", BUDGET), ("other-value", {GPU_BUDGET_LABEL[0]: "team-b"})):
        core.create_namespace({"metadata": {"name": ns, "labels": labels}})
    core.create_namespace({"metadata": {"name": "plain"}})
    admission.create_validating_admission_policy(
        {"metadata": {"name": POLICY_NAME}, "spec": budget_policy_spec("team-a", SHARES)}
    )
    admission.create_validating_admission_policy_binding(
        {"metadata": {"name": POLICY_NAME}, "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]}}
    )

    def enforced() -> bool:
        return "gpu-scheduler-hami" in refusal(core, "inference", pod("probe", SLICE, scheduler="default-scheduler"))

    assert settles(enforced, timeout=30), "the budget policy was never enforced"
    yield core
    cluster.stop()


def test_what_the_budget_admits(budget):
    assert refusal(budget, "inference", pod("slice", SLICE)) == ""
    assert refusal(budget, "default", pod("card", {ha.RES_GPU: "1"})) == ""
    for ns in ("inference", "plain", "sneaky"):
        assert refusal(budget, ns, pod("cpu", scheduler=None)) == ""
    assert refusal(budget, "plain", pod("cpu-named", node="somewhere", scheduler=None, privileged=True)) == ""


@pytest.mark.parametrize(
    ("case", "ns", "body", "rule"),
    [
        ("default scheduler", "inference", pod("p", SLICE, scheduler="default-scheduler"), "gpu-scheduler-hami"),
        ("no scheduler (defaulted)", "inference", pod("p", SLICE, scheduler=None), "gpu-scheduler-hami"),
        ("own scheduler", "inference", pod("p", SLICE, scheduler="my-scheduler"), "gpu-scheduler-hami"),
        (
            "webhook skipped by label",
            "inference",
            pod("p", SLICE, labels={ha.HAMI_WEBHOOK_LABEL[0]: ha.HAMI_WEBHOOK_LABEL[1]}),
            "gpu-webhook-not-skipped",
        ),
        ("privileged", "inference", pod("p", SLICE, privileged=True), "gpu-not-privileged"),
        ("node named", "inference", pod("p", SLICE, node="gpu-node-0"), "gpu-no-node-name"),
        ("namespace labelled like a budget", "sneaky", pod("p", SLICE), "gpu-budget-namespace"),
        ("namespace with another budget value", "other-value", pod("p", SLICE), "gpu-budget-namespace"),
        ("namespace without a budget", "plain", pod("p", SLICE), "gpu-budget-namespace"),
        ("GPU only in an init container", "plain", pod("p", init_gpu=SLICE), "gpu-budget-namespace"),
        (
            "GPU only in an init container, default scheduler",
            "inference",
            pod("p", init_gpu={ha.RES_GPU: "1"}, scheduler="default-scheduler"),
            "gpu-scheduler-hami",
        ),
        ("a resource no budget counts", "inference", pod("p", {"nvidia.com/gpu.shared": "1"}), "gpu-resource-counted"),
    ],
)
def test_bypass_refused(budget, case, ns, body, rule):
    said = refusal(budget, ns, body)
    assert said, f"{case}: admitted"
    assert rule in said and "tenant team-a" in said, f"{case}: {said}"


def test_gpu_in_an_ephemeral_container_refused(budget):
    name = f"debug-{uuid.uuid4().hex[:6]}"
    budget.create_namespaced_pod("inference", pod(name, scheduler=None))
    try:
        debug = {"name": "dbg", "image": "x", "resources": {"limits": {ha.RES_GPU: "1"}}}
        with pytest.raises(client.ApiException) as refused:
            budget.patch_namespaced_pod_ephemeralcontainers(
                name, "inference", {"spec": {"ephemeralContainers": [debug]}}, dry_run="All"
            )
        # the API server's own validation forbids resources there; the policy would refuse it too
        assert refused.value.status in (403, 422), refused.value.body
        assert "ephemeral" in refused.value.body.lower() or "gpu-no-ephemeral-request" in refused.value.body
        plain = {"name": "dbg", "image": "x"}
        budget.patch_namespaced_pod_ephemeralcontainers(
            name, "inference", {"spec": {"ephemeralContainers": [plain]}}, dry_run="All"
        )
    finally:
        budget.delete_namespaced_pod(name, "inference", grace_period_seconds=0)
