"""HamiWebhookProbe against a real kube-apiserver: with no webhook reachable it fails with a
plain reason; with a mutating webhook that rewrites schedulerName as HAMi's does (a stand-in:
HAMi cannot be built here) registered on the API server, it passes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from kubernetes import client

from components.lifecycle import webhook_probe as wp
from tests.support.cluster import self_signed
from tests.support.webhooks import StandInMutator, serve_tls

pytestmark = pytest.mark.integration
PROGRAM = Path(__file__).parent / "programs" / "webhook_probe"
UPDATE_TIMEOUT = 15  # the update's probe; a refresh probes for at most 10 s


def test_unreachable_webhook_is_reported_plainly(cluster):
    with pytest.raises(wp.WebhookUnreachableError) as err:
        wp.probe(cluster.core(), "default", timeout=1, interval=0.5)
    text = str(err.value)
    assert "schedulerName 'default-scheduler'" in text
    assert "Konnectivity" in text and "default scheduler, without HAMi" in text


@pytest.fixture
def stand_in_webhook(cluster):
    w = cluster.workdir
    crt, key = self_signed(w, "webhook", "/CN=127.0.0.1", san="IP:127.0.0.1")
    server, port = serve_tls(StandInMutator, crt, key)
    api = client.AdmissionregistrationV1Api(cluster.api_client())
    name = "stand-in-vgpu.hami.io"
    api.create_mutating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "vgpu.hami.io",
                    "admissionReviewVersions": ["v1beta1"],
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/webhook",
                        "caBundle": base64.b64encode(crt.read_bytes()).decode(),
                    },
                    "rules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                    ],
                    "sideEffects": "None",
                    "failurePolicy": "Ignore",
                    "timeoutSeconds": 5,
                }
            ],
        }
    )
    yield
    api.delete_mutating_webhook_configuration(name)
    server.shutdown()


def test_reachable_webhook_passes_and_nothing_is_created(cluster, stand_in_webhook):
    core = cluster.core()
    assert wp.probe(core, "default", timeout=30, interval=0.5) == "hami-scheduler"
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod(wp.PROBE_POD, "default")
    assert err.value.status == 404  # dry run: the probe pod was never stored


def test_refresh_reports_an_unreached_webhook_as_drift_within_its_short_timeout(cluster):
    """A refresh (read) does not wait out the update's 180 s and does not fail: it records what
    the probe saw, and the diff asks for an update, which probes again with its full timeout."""
    from components.providers.webhook_probe import HamiWebhookProbeProvider

    p = HamiWebhookProbeProvider()
    props = {"kubeconfig": cluster.kubeconfig_text, "namespace": "default", "timeout_seconds": 180}
    read = p.read("default/gpu-tenancy-webhook-probe", {**props, "scheduler_name": "hami-scheduler"})
    assert read.outs["scheduler_name"] == "default-scheduler"
    assert p.diff("default/gpu-tenancy-webhook-probe", read.outs, props).changes


def test_up_refresh_gets_past_a_down_webhook_and_repairs_once_it_is_back(pulumi_cli, cluster, stand_in_webhook):
    """Through the engine: with the webhook down, `up --refresh` is not stopped by the refresh
    (the update probes and fails with the update's reason); once it is back, `up --refresh`
    passes and a further refresh finds nothing to change."""
    work = pulumi_cli.new_stack(PROGRAM, cluster.workdir / "webhook-probe", cluster.kubeconfig_text)
    pulumi_cli("config", "set", "timeoutSeconds", str(UPDATE_TIMEOUT), cwd=work)
    try:
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        StandInMutator.down = True
        broken = pulumi_cli("up", "--refresh", "--yes", "--skip-preview", cwd=work, check=False)
        assert broken.returncode != 0
        said = broken.stdout + broken.stderr
        assert f"did not mutate a GPU pod within {UPDATE_TIMEOUT:g} s" in said, said  # the update's probe
        assert "schedulerName 'default-scheduler'" in said
        StandInMutator.down = False
        pulumi_cli("up", "--refresh", "--yes", "--skip-preview", cwd=work)
        outputs = json.loads(pulumi_cli("stack", "output", "--json", cwd=work).stdout)
        assert outputs["schedulerName"] == "hami-scheduler"
        pulumi_cli("preview", "--refresh", "--expect-no-changes", cwd=work)
    finally:
        StandInMutator.down = False
        pulumi_cli("destroy", "--yes", cwd=work, check=False)


def account_kubeconfig(cluster, name: str) -> tuple[str, str]:
    """A cluster-admin ServiceAccount's kubeconfig and its bound token (revoked with the account)."""
    from components.kube.client import cluster_ca, token_kubeconfig

    core = cluster.core()
    core.create_namespaced_service_account("default", {"metadata": {"name": name}})
    client.RbacAuthorizationV1Api(cluster.api_client()).create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        }
    )
    request = {"spec": {"expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token(name, "default", request).status.token
    return token_kubeconfig(f"https://{cluster.endpoint}", cluster_ca(cluster.kubeconfig_text), token), token


def test_a_rotated_credential_alone_probes_nothing_and_a_lapsed_one_passes_refresh_and_destroy(
    pulumi_cli, cluster, stand_in_webhook
):
    """Through the engine: a renewed credential is stored by an update that does not probe again
    (the webhook is down by then: a probe would fail); once every credential lapsed (401), a
    refresh finds nothing to change and a destroy passes (the probe holds nothing in the tenant)."""
    from components.kube.client import core_api

    old, old_token = account_kubeconfig(cluster, "rotate-old")
    new, new_token = account_kubeconfig(cluster, "rotate-new")
    work = pulumi_cli.new_stack(PROGRAM, cluster.workdir / "webhook-rotate", old)
    pulumi_cli("config", "set", "timeoutSeconds", str(UPDATE_TIMEOUT), cwd=work)
    try:
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        StandInMutator.down = True
        pulumi_cli("config", "set", "--secret", "kubeconfig", new, cwd=work)
        up = pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        assert "1 updated" in up.stdout, up.stdout
        state = pulumi_cli("stack", "export", "--show-secrets", cwd=work).stdout
        assert new_token in state and old_token not in state, "the state keeps the old credential"

        for name in ("rotate-old", "rotate-new"):
            cluster.core().delete_namespaced_service_account(name, "default")
        with pytest.raises(client.ApiException) as lapsed:
            core_api(new).list_namespace()
        assert lapsed.value.status == 401
        pulumi_cli("preview", "--refresh", "--expect-no-changes", cwd=work)
        pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work)
    finally:
        StandInMutator.down = False
        pulumi_cli("destroy", "--yes", cwd=work, check=False)
        rbac = client.RbacAuthorizationV1Api(cluster.api_client())
        for name in ("rotate-old", "rotate-new"):
            rbac.delete_cluster_role_binding(name)
