"""The stack's identity inside a tenant, through the real engine on a real API server: the
super-admin stand-in makes the ServiceAccount and its binding and nothing else; everything else
runs on a bound, expiring token of that account (not system:masters), which deleting its binding
revokes; a token in its renewal window is replaced by `up` (a second `up` then changes nothing);
refreshing the binding alone then `up` restores it; destroy removes the identity last."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.domain.names import AUTOMATION_ACCOUNT
from components.kube.bound_token import account_of, expires
from components.kube.client import api_client

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).parent / "programs" / "automation_identity"
pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(with_garbage_collector):
    return with_garbage_collector


@pytest.fixture
def stack(pulumi_cli, cluster, tmp_path):
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", cluster.kubeconfig_text)
    pulumi_cli("config", "set", "endpoint", f"https://127.0.0.1:{cluster.port}", cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", cwd=work, check=False)


def readme_repair() -> list[str]:
    """The documented repair of a deleted automation binding (docs/trust-boundaries.md, the bash
    block after "is repaired with:"), for tenant team-a, non-interactive as in CI."""
    text = (ROOT / "docs" / "trust-boundaries.md").read_text()
    block = text.split("is repaired with:\n```bash\n", 1)[1].split("```", 1)[0]
    steps = [ln.replace("<tenant>", "team-a") for ln in block.splitlines() if ln.strip()]
    assert steps[0].startswith("pulumi refresh --target") and steps[-1] == "pulumi up", steps
    return [f"{st} --yes --non-interactive" if st == "pulumi up" else st for st in steps]


def outputs(pulumi_cli, work) -> dict:
    return json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=work).stdout)


def who(kubeconfig: str) -> tuple[str, list[str]]:
    review = client.AuthenticationV1Api(api_client(kubeconfig)).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    info = review.status.user_info
    return info.username, list(info.groups or [])


def exists(call, *args) -> bool:
    try:
        call(*args)
        return True
    except client.ApiException as exc:
        assert exc.status == 404
        return False


def test_the_stack_acts_in_a_tenant_as_its_own_revocable_identity(pulumi_cli, cluster, stack):
    core, rbac = cluster.core(), client.RbacAuthorizationV1Api(cluster.api_client())
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    out = outputs(pulumi_cli, stack)
    kubeconfig = out["kubeconfig"]
    token = yaml.safe_load(kubeconfig)["users"][0]["user"]["token"]
    user, groups = who(kubeconfig)
    assert user == f"system:serviceaccount:kube-system:{AUTOMATION_ACCOUNT}" and "system:masters" not in groups
    assert account_of(token) == ("kube-system", AUTOMATION_ACCOUNT)
    assert 3600 - 120 < expires(token) - time.time() <= 3600  # bound and expiring
    assert exists(core.read_namespaced_config_map, "made-by-automation", "default")
    # nothing but the identity itself went through the super-admin's provider
    state = json.loads(pulumi_cli("stack", "export", "--show-secrets", cwd=stack).stdout)
    boot = [
        r
        for r in state["deployment"]["resources"]
        if r["type"] == "pulumi:providers:kubernetes" and "bootstrap" in r["urn"]
    ]
    (boot_urn,) = [f"{r['urn']}::{r['id']}" for r in boot]
    made = sorted(
        r["urn"].rsplit("::", 1)[1] for r in state["deployment"]["resources"] if r.get("provider") == boot_urn
    )
    assert made == ["team-a-cp-automation", "team-a-cp-automation-binding"]
    assert "gpu-tenancy-automation" in json.dumps(state) and cluster.kubeconfig_text not in json.dumps(
        [r for r in state["deployment"]["resources"] if r["type"].startswith("kubernetes:core/v1:ConfigMap")]
    )
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)

    # in its renewal window: the next up issues a new token, the one after changes nothing
    pulumi_cli("config", "set", "renewBeforeSeconds", "3700", cwd=stack)
    preview = pulumi_cli("preview", "--diff", cwd=stack).stdout
    assert "replace" in preview
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    renewed = outputs(pulumi_cli, stack)
    assert renewed["expires"] != out["expires"] or renewed["kubeconfig"] != kubeconfig
    pulumi_cli("config", "set", "renewBeforeSeconds", "600", cwd=stack)
    pulumi_cli("up", "--yes", "--skip-preview", cwd=stack)
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)

    # revocable: without its binding the identity can do nothing
    rbac.delete_cluster_role_binding(f"gpu-tenancy:{AUTOMATION_ACCOUNT}")
    ns = client.CoreV1Api(api_client(renewed["kubeconfig"]))
    with pytest.raises(client.ApiException) as refused:
        ns.read_namespaced_config_map("made-by-automation", "default")
    assert refused.value.status == 403
    # the repair docs/trust-boundaries.md gives, run as written: refresh the binding alone (through the
    # super-admin), then up
    for step in readme_repair():
        subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=stack, env=pulumi_cli.env, check=True)
    assert exists(rbac.read_cluster_role_binding, f"gpu-tenancy:{AUTOMATION_ACCOUNT}")

    pulumi_cli("destroy", "--yes", cwd=stack)
    assert not exists(core.read_namespaced_service_account, AUTOMATION_ACCOUNT, "kube-system")
    assert not exists(rbac.read_cluster_role_binding, f"gpu-tenancy:{AUTOMATION_ACCOUNT}")
