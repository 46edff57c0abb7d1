"""The stack's charts from a local directory or an OCI registry, through the real engine and the
kubernetes provider against the real kube-apiserver (closed networks: no chart repository).

No upstream chart can be had here, so the charts are the test's own, named and versioned as the
stack pins them, whose one template writes the values the release was given into a ConfigMap:
the stack's own values must arrive. The OCI registry is Debian's docker-registry on loopback
(tools/lab/registry.sh), filled with Helm's own CLI (`helm package`, `helm push`, built by
tools/build.sh at the Helm the provider vendors).

With HAMI_SRC set to a HAMi repository at the pinned chart version, its real charts/hami is
installed too, with the stack's values (rendered and created; no hooks run, nothing waited for).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.config import chart_sources, versions
from components.config.model import POOL_DOCKER, HamiConfig
from components.domain.names import POOL_MODE_LABEL
from components.platform.kamaji import kamaji_values
from components.tenant.hami import hami_values
from tests.support.charts import REGISTRY_SH, Helm, LabRegistry, Registry, real_hami_chart, write_chart
from tests.support.cluster import free_port, routable_ip, self_signed, signed_by, start_cluster
from tests.support.tools import require

pytestmark = pytest.mark.integration
PROGRAM = Path(__file__).parent / "programs" / "chart_source"
HAMI_VERSION = versions.HAMI_CHART_VERSION
KAMAJI_VERSION = versions.KAMAJI_CHART_VERSION


def plain(value: object) -> object:
    """As the values come back through YAML and JSON."""
    return json.loads(json.dumps(value))


STACK_HAMI_VALUES = plain(hami_values(versions.DEFAULT_TENANT_VERSION, HamiConfig()))


def require_registry() -> None:
    if shutil.which("docker-registry") is None:
        pytest.skip("no docker-registry, the OCI registry these tests push charts to (apt-get install docker-registry)")


@pytest.fixture(scope="module")
def helm(tools, tmp_path_factory) -> Helm:
    require(tools, "helm")
    return Helm(tools, tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The lab's registry script, on a free loopback port, its files in a cache of its own
    (docker-registry started here where the script is missing)."""
    require_registry()
    listen, work = f"127.0.0.1:{free_port()}", tmp_path_factory.mktemp("registry-cache")
    reg = LabRegistry(work, listen) if REGISTRY_SH.exists() else Registry(work, listen)
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def hami_in_registry(helm, registry, tmp_path_factory) -> str:
    """The test's hami chart at the pinned version, pushed over plain HTTP: its oci:// reference."""
    work = tmp_path_factory.mktemp("hami-oci")
    archive = helm.package(write_chart(work / "hami", "hami", HAMI_VERSION), work / "out")
    # as docs/closed-networks.md fills a mirror: no --plain-http, Helm falls back to it by itself
    said = helm.push(archive, f"oci://{registry.host}/charts")
    assert f"Pushed: {registry.host}/charts/hami:{HAMI_VERSION}" in said
    return f"oci://{registry.host}/charts/hami:{HAMI_VERSION}"


class ChartStack:
    """The chart_source program in a stack of its own, on `cluster`, in a namespace of its own."""

    def __init__(self, pulumi_cli, cluster, work: Path):
        self.cli, self.cluster = pulumi_cli, cluster
        self.work = pulumi_cli.new_stack(PROGRAM, work, cluster.kubeconfig_text)
        self.namespace = f"charts-{uuid.uuid4().hex[:6]}"
        self.cli("config", "set", "namespace", self.namespace, cwd=self.work)

    def configure(self, chart: str, source: str, render_only: bool = False) -> None:
        self.cli("config", "set", "chart", chart, cwd=self.work)
        self.cli("config", "set", "source", source, cwd=self.work)
        if render_only:
            self.cli("config", "set", "renderOnly", "true", cwd=self.work)

    def up(self, chart: str, source: str, render_only: bool = False) -> dict:
        self.configure(chart, source, render_only)
        self.cli("up", "--yes", "--skip-preview", cwd=self.work)
        return json.loads(self.cli("stack", "output", "--json", cwd=self.work).stdout)

    def preview(self, chart: str, source: str, env: dict[str, str] | None = None):
        self.configure(chart, source)
        saved = self.cli.env
        self.cli.env = {**saved, **(env or {})}
        try:
            return self.cli("preview", "--diff", cwd=self.work, check=False)
        finally:
            self.cli.env = saved

    def rendered(self, chart: str) -> dict:
        """What the chart's template wrote: the chart it is, and the values it was given."""
        cm = self.cluster.core().read_namespaced_config_map(f"{chart}-values", self.namespace)
        return {"chart": cm.data["chart"], "values": json.loads(cm.data["values.json"])}

    def destroy(self) -> None:
        self.cli("destroy", "--yes", cwd=self.work, check=False)


@pytest.fixture
def stack(pulumi_cli, cluster, tmp_path):
    s = ChartStack(pulumi_cli, cluster, tmp_path / "program")
    yield s
    s.destroy()


def test_a_chart_from_a_directory_then_from_the_registry_is_one_release_upgraded_in_place(
    stack, tmp_path, hami_in_registry
):
    chart = write_chart(tmp_path / "mirror" / "hami", "hami", HAMI_VERSION)
    out = stack.up("hami", str(chart))
    assert (out["status"]["chart"], out["status"]["version"], out["status"]["revision"]) == ("hami", HAMI_VERSION, 1)
    assert stack.rendered("hami") == {"chart": f"hami-{HAMI_VERSION}", "values": STACK_HAMI_VALUES}

    # The same chart from the OCI registry: only `chart` changes, and Helm upgrades the release.
    preview = stack.preview("hami", hami_in_registry)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "replace" not in preview.stdout, preview.stdout
    assert f'chart: "{chart}" => "{hami_in_registry.rsplit(":", 1)[0]}"' in preview.stdout, preview.stdout
    out = stack.up("hami", hami_in_registry)
    assert (out["status"]["version"], out["status"]["revision"]) == (HAMI_VERSION, 2)
    assert stack.rendered("hami") == {"chart": f"hami-{HAMI_VERSION}", "values": STACK_HAMI_VALUES}


def test_a_plus_version_travels_as_an_underscore_tag_with_its_dependency(stack, helm, registry, tmp_path):
    """Kamaji's only version is 0.0.0+latest: pushed under tag 0.0.0_latest, its kamaji-etcd
    dependency packed inside, installed with the stack's values for both."""
    chart = write_chart(tmp_path / "kamaji", "kamaji", KAMAJI_VERSION, subcharts={"kamaji-etcd": "0.15.2"})
    said = helm.push(helm.package(chart, tmp_path / "out"), f"oci://{registry.host}/mirror", plain_http=True)
    assert f"{registry.host}/mirror/kamaji:0.0.0_latest" in said
    stack.up("kamaji", f"oci://{registry.host}/mirror/kamaji:{chart_sources.oci_tag(KAMAJI_VERSION)}")
    given = plain(kamaji_values())
    rendered = stack.rendered("kamaji")
    assert rendered["chart"] == f"kamaji-{KAMAJI_VERSION}"
    assert {k: v for k, v in rendered["values"].items() if k != "kamaji-etcd"} == {
        k: v for k, v in given.items() if k != "kamaji-etcd"
    }
    etcd = stack.rendered("kamaji-etcd")
    assert etcd["chart"] == "kamaji-etcd-0.15.2"
    assert given["kamaji-etcd"].items() <= etcd["values"].items()


def test_a_chart_missing_from_the_registry_fails_the_preview_naming_it(stack, registry):
    result = stack.preview("cert-manager", f"oci://{registry.host}/charts/cert-manager:{versions.CERT_MANAGER_VERSION}")
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{registry.host}/charts/cert-manager:{versions.CERT_MANAGER_VERSION}: not found" in out, out


def test_plain_http_is_used_on_any_address_not_only_loopback(stack, helm, tmp_path):
    """The provider's Helm asks https first and, when an HTTP server answers, falls back to plain
    HTTP whatever the host (helm/pkg/registry/fallback.go): a registry on a routable address works."""
    require_registry()
    reg = Registry(tmp_path / "registry", f"{routable_ip()}:{free_port()}")
    try:
        archive = helm.package(write_chart(tmp_path / "hami", "hami", HAMI_VERSION), tmp_path / "out")
        helm.push(archive, f"oci://{reg.host}/charts", plain_http=True)
        # the preview's check pulls and loads the chart
        result = stack.preview("hami", f"oci://{reg.host}/charts/hami:{HAMI_VERSION}")
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        reg.stop()


def test_an_https_registry_with_a_private_ca_needs_the_ca_trusted_by_pulumi(stack, helm, tmp_path):
    """The provider pulls OCI charts with its own registry client, which knows only the system's
    roots (repositoryOpts.caFile is not used for OCI): SSL_CERT_FILE for `pulumi` makes it trust one."""
    require_registry()
    certs = tmp_path / "certs"
    certs.mkdir()
    ca, _ = self_signed(certs, "ca", "/CN=gpu-tenancy-test-registry-ca")
    tls = signed_by(certs, "ca", "registry", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1")
    reg = Registry(tmp_path / "registry", f"127.0.0.1:{free_port()}", tls=tls, ca=ca)
    try:
        archive = helm.package(write_chart(tmp_path / "hami", "hami", HAMI_VERSION), tmp_path / "out")
        helm.push(archive, f"oci://{reg.host}/charts", ca_file=ca)
        reference = f"oci://{reg.host}/charts/hami:{HAMI_VERSION}"
        untrusted = stack.preview("hami", reference)
        assert untrusted.returncode != 0
        assert "certificate signed by unknown authority" in untrusted.stdout + untrusted.stderr
        trusted = stack.preview("hami", reference, env={"SSL_CERT_FILE": str(ca)})
        assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    finally:
        reg.stop()


# -- the real HAMi chart ------------------------------------------------------------------------


@pytest.fixture(name="real_hami_chart")
def real_hami_chart_fixture() -> Path:
    return real_hami_chart()


def assert_stack_values_rendered(cluster, namespace: str) -> None:
    """HAMi's objects as its chart rendered them from the stack's values."""
    apps = client.AppsV1Api(cluster.api_client())
    scheduler = apps.read_namespaced_deployment("hami-scheduler", namespace)
    containers = {c.name: c for c in scheduler.spec.template.spec.containers}
    kube_scheduler = containers["kube-scheduler"]
    assert kube_scheduler.image == f"registry.k8s.io/kube-scheduler:{versions.DEFAULT_TENANT_VERSION}"
    assert {"--config=/config/config.yaml", "-v=1"} <= set(kube_scheduler.command)
    extender = containers["vgpu-scheduler-extender"]
    assert extender.image.endswith(f":{versions.HAMI_EXTENDER_IMAGE_TAG}")
    for flag in ("--kube-qps=200", "--kube-burst=400", "-v=1", "--node-lock-timeout=5m"):
        assert flag in extender.command + (extender.args or []), extender.command
    assert scheduler.spec.template.spec.node_selector == {POOL_MODE_LABEL: POOL_DOCKER}
    daemonsets = {d.metadata.name for d in apps.list_namespaced_daemon_set(namespace).items}
    assert any("mock" in d for d in daemonsets), daemonsets
    assert not any("nvidia" in d for d in daemonsets), daemonsets
    assert cluster.core().read_namespaced_service("hami-scheduler", namespace).spec.type == "ClusterIP"


def test_the_real_hami_chart_takes_the_stack_values_from_its_directory_and_from_the_registry(
    real_hami_chart, pulumi_cli, tools, helm, registry, tmp_path
):
    """HAMi's own chart with the stack's values, on a cluster of its own (its webhook
    configuration would see every other test's pods), from its directory, then packaged and
    pushed to the registry and installed from there: what the stack sets is what it renders."""
    require(tools, "kube-apiserver", "etcd", "openssl")
    archive = helm.package(real_hami_chart, tmp_path / "out")
    helm.push(archive, f"oci://{registry.host}/real", plain_http=True)
    cluster = start_cluster(tools)
    s = ChartStack(pulumi_cli, cluster, tmp_path / "program")
    try:
        out = s.up("hami", str(real_hami_chart), render_only=True)
        assert (out["status"]["chart"], out["status"]["version"]) == ("hami", HAMI_VERSION)
        assert_stack_values_rendered(cluster, s.namespace)
        out = s.up("hami", f"oci://{registry.host}/real/hami:{HAMI_VERSION}", render_only=True)
        assert (out["status"]["version"], out["status"]["revision"]) == (HAMI_VERSION, 2)
        assert_stack_values_rendered(cluster, s.namespace)
    finally:
        s.destroy()
        cluster.stop()


# -- a bad `charts.*` key stops the stack's own program -------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("charts/hami", "{project}/charts/hami has no Chart.yaml: give the unpacked chart's directory"),
        (
            "oci://127.0.0.1:5000/charts/hami",
            f"names no tag: write the chart version the stack pins, oci://127.0.0.1:5000/charts/hami:{HAMI_VERSION}",
        ),
    ],
    ids=["directory-without-chart-yaml", "oci-without-tag"],
)
def test_a_bad_chart_source_stops_the_preview_in_one_line_naming_the_key(pulumi_cli, project, value, says):
    (project / "charts" / "hami").mkdir(parents=True)
    stack_file = project / "Pulumi.dev.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"]["gpu-tenancy:charts"] = {"hami": value}
    stack_file.write_text(yaml.safe_dump(doc))
    result = pulumi_cli("preview", cwd=project, check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "invalid stack config (1 problem(s))" in out, out
    lines = [line.strip() for line in out.splitlines() if "gpu-tenancy:charts" in line]
    assert lines == [f"gpu-tenancy:charts.hami: {says.format(project=project)}"], out
    assert "Traceback" not in out
