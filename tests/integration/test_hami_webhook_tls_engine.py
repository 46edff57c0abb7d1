"""HAMi's webhook certificate as the stack makes it (no certgen job), through the real engine
and a real kube-apiserver: the Secret the chart mounts, the CA in the chart's webhook
configuration, and the API server itself verifying the webhook with that CA when it calls it
(a stand-in webhook served with the Secret's certificate; HAMi cannot be built in CI), kept by
a Helm upgrade, unchanged by a second `up`, gone after `destroy`. The chart is the test's own,
shaped as HAMi's: its MutatingWebhookConfiguration carries no CA."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.config import versions
from components.config.model import HamiConfig
from components.domain.names import HAMI_NAMESPACE, WEBHOOK_CERTIFICATE_ANNOTATION
from components.lifecycle import webhook_probe as wp
from components.tenant.hami import (
    HAMI_SCHEDULER_SERVICE,
    HAMI_TLS_SECRET,
    HAMI_WEBHOOK,
    HAMI_WEBHOOK_CONFIGURATION,
    hami_values,
)
from tests.support.charts import real_hami_chart
from tests.support.cluster import free_port, start_cluster
from tests.support.tools import require
from tests.support.webhooks import StandInMutator, serve_tls

pytestmark = pytest.mark.integration
PROGRAM = Path(__file__).parent / "programs" / "hami_webhook_tls"
VERSION = "0.1.0"
WEBHOOK = """apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ .Release.Name }}-webhook
  labels:
    revision: {{ .Values.revision | quote }}
webhooks:
  - name: vgpu.hami.io
    admissionReviewVersions: [v1beta1]
    clientConfig:
      url: {{ .Values.webhookUrl }}
    failurePolicy: Ignore
    sideEffects: None
    timeoutSeconds: 5
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [pods]
"""
# What the chart gave the scheduler's pods, read back by the test.
ANNOTATIONS = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-scheduler-pod-annotations
data:
  annotations.json: {{ toJson .Values.scheduler.podAnnotations | quote }}
"""


@pytest.fixture(scope="module")
def tenant(tools):
    """An API server with the namespace controller and the garbage collector, as a tenant has: a
    namespace's deletion waits for the one, the provider's foreground deletes for the other."""
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    c = start_cluster(tools)
    c.start_controller_manager(["namespace", "garbagecollector"])
    yield c
    c.stop()


def _chart(path: Path) -> Path:
    (path / "templates").mkdir(parents=True)
    (path / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": "hami", "version": VERSION}))
    (path / "templates" / "webhook.yaml").write_text(WEBHOOK)
    (path / "templates" / "annotations.yaml").write_text(ANNOTATIONS)
    return path


def _ca_bundle(tenant) -> str:
    api = client.AdmissionregistrationV1Api(tenant.api_client())
    (webhook,) = api.read_mutating_webhook_configuration(HAMI_WEBHOOK_CONFIGURATION).webhooks
    assert webhook.name == HAMI_WEBHOOK
    return webhook.client_config.ca_bundle or ""


def _gone(call, *args) -> bool:
    try:
        call(*args)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def _values(url: str, revision: str) -> str:
    return json.dumps({"webhookUrl": url, "revision": revision, "scheduler": {}})


def _stack(pulumi_cli, tenant, work: Path, chart: Path, version: str, values: str, render_only: bool = False) -> Path:
    work = pulumi_cli.new_stack(PROGRAM, work, tenant.kubeconfig_text)
    for key, value in (("chart", str(chart)), ("version", version), ("values", values)):
        pulumi_cli("config", "set", key, value, cwd=work)
    if render_only:
        pulumi_cli("config", "set", "renderOnly", "true", cwd=work)
    return work


def _up(pulumi_cli, work: Path) -> dict:
    pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
    return json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=work).stdout)


def _serving(tenant, tmp_path: Path, port: int, out: dict):
    """The stand-in webhook on `port`, served with the certificate in the Secret the chart mounts
    (checked against the stack's outputs first)."""
    secret = tenant.core().read_namespaced_secret(HAMI_TLS_SECRET, HAMI_NAMESPACE)
    assert secret.type == "kubernetes.io/tls"
    data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"} and data["ca.crt"] == out["caCrt"]
    assert base64.b64decode(_ca_bundle(tenant)).decode() == out["caCrt"]
    (tmp_path / "tls.crt").write_text(data["tls.crt"])
    (tmp_path / "tls.key").write_text(data["tls.key"])
    server, _ = serve_tls(StandInMutator, tmp_path / "tls.crt", tmp_path / "tls.key", port)
    return server, data["tls.key"]


def _all_gone(tenant) -> None:
    core = tenant.core()
    api = client.AdmissionregistrationV1Api(tenant.api_client())
    assert _gone(core.read_namespaced_secret, HAMI_TLS_SECRET, HAMI_NAMESPACE)
    assert _gone(api.read_mutating_webhook_configuration, HAMI_WEBHOOK_CONFIGURATION)
    assert _gone(core.read_namespace, HAMI_NAMESPACE)


def test_the_api_server_trusts_the_stacks_certificate_through_an_upgrade_until_destroy(pulumi_cli, tenant, tmp_path):
    core = tenant.core()
    port = free_port()
    url = f"https://127.0.0.1:{port}/webhook"
    work = _stack(pulumi_cli, tenant, tmp_path / "program", _chart(tmp_path / "chart"), VERSION, _values(url, "1"))
    server = None
    try:
        out = _up(pulumi_cli, work)
        annotations = core.read_namespaced_config_map("hami-scheduler-pod-annotations", HAMI_NAMESPACE).data
        assert json.loads(annotations["annotations.json"]) == {WEBHOOK_CERTIFICATE_ANNOTATION: out["fingerprint"]}
        # The API server calls the webhook, served with the Secret's certificate, and verifies
        # it with the CA the stack put in the configuration: the project's probe sees HAMi's answer.
        server, key = _serving(tenant, tmp_path, port, out)
        assert wp.probe(core, "default", timeout=30, interval=0.5) == "hami-scheduler"

        exported = pulumi_cli("stack", "export", cwd=work).stdout
        assert "PRIVATE KEY" not in exported and key.splitlines()[1] not in exported
        pulumi_cli("preview", "--expect-no-changes", cwd=work)

        # A Helm upgrade (a changed value) re-applies the chart's manifest, which names no CA.
        pulumi_cli("config", "set", "values", _values(url, "2"), cwd=work)
        assert _up(pulumi_cli, work) == out
        api = client.AdmissionregistrationV1Api(tenant.api_client())
        assert api.read_mutating_webhook_configuration(HAMI_WEBHOOK_CONFIGURATION).metadata.labels["revision"] == "2"
        assert base64.b64decode(_ca_bundle(tenant)).decode() == out["caCrt"]
        assert wp.probe(core, "default", timeout=30, interval=0.5) == "hami-scheduler"
        pulumi_cli("preview", "--expect-no-changes", cwd=work)
    finally:
        pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, check=False)
        if server is not None:
            server.shutdown()
    _all_gone(tenant)


def test_hamis_own_chart_mounts_the_certificate_and_its_webhook_takes_the_ca(pulumi_cli, tools, tmp_path):
    """HAMi's real chart (HAMI_SRC) with the stack's values, rendered on a cluster of its own: its
    scheduler mounts the stack's Secret and carries the fingerprint, no certgen job is rendered,
    and the CA patch meets the chart's own webhook configuration (its name and its webhook's),
    which the API server then verifies the stand-in by (the chart's customURL pointing at it)."""
    chart = real_hami_chart()
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    tenant = start_cluster(tools)
    tenant.start_controller_manager(["namespace", "garbagecollector"])
    port = free_port()
    values = hami_values(versions.DEFAULT_TENANT_VERSION, HamiConfig())
    values["scheduler"]["admissionWebhook"] = {
        "customURL": {"enabled": True, "host": "127.0.0.1", "port": port, "path": "/webhook"}
    }
    work = _stack(
        pulumi_cli, tenant, tmp_path / "program", chart, versions.HAMI_CHART_VERSION, json.dumps(values), True
    )
    server = None
    try:
        out = _up(pulumi_cli, work)
        apps = client.AppsV1Api(tenant.api_client())
        template = apps.read_namespaced_deployment(HAMI_SCHEDULER_SERVICE, HAMI_NAMESPACE).spec.template
        assert template.metadata.annotations[WEBHOOK_CERTIFICATE_ANNOTATION] == out["fingerprint"]
        mounted = {v.name: v.secret.secret_name for v in template.spec.volumes if v.secret}
        assert mounted.get("tls-config") == HAMI_TLS_SECRET, mounted
        batch = client.BatchV1Api(tenant.api_client())
        assert not batch.list_namespaced_job(HAMI_NAMESPACE).items
        server, _ = _serving(tenant, tmp_path, port, out)
        assert wp.probe(tenant.core(), "default", timeout=30, interval=0.5) == "hami-scheduler"
        pulumi_cli("preview", "--expect-no-changes", cwd=work)
    finally:
        pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, check=False)
        if server is not None:
            server.shutdown()
    try:
        _all_gone(tenant)
    finally:
        tenant.stop()
