"""Where a chart comes from: a config string read into a ChartSource (repository, directory, OCI)
against the chart the stack pins, and what helm.v3.Release is given for each."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml

from components.config import chart_sources as cs
from components.config import versions
from components.config.chart_sources import ChartSource, ChartSourceError
from components.platform.helm import Chart, chart_inputs
from tests.support.harness import ROOT, load_config_file, run_program

HAMI = versions.HAMI_CHART
HAMI_VERSION = versions.HAMI_CHART_VERSION
KAMAJI_VERSION = versions.KAMAJI_CHART_VERSION  # 0.0.0+latest: a `+` no OCI tag may hold


def parse(value: object, tmp_path: Path, chart: str = HAMI, version: str = HAMI_VERSION) -> ChartSource:
    return cs.parse(value, chart, version, tmp_path)


def refused(value: object, tmp_path: Path, chart: str = HAMI, version: str = HAMI_VERSION) -> str:
    with pytest.raises(ChartSourceError) as exc:
        parse(value, tmp_path, chart, version)
    return str(exc.value)


def write_chart(path: Path, name: str = HAMI, version: str = HAMI_VERSION, **extra: object) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version, **extra}))
    return path


def package(chart_dir: Path, archive: Path) -> None:
    """A chart archive as `helm package` writes it: `<name>/...` at the top."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(chart_dir, arcname=chart_dir.name)


# -- repository ------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [versions.HAMI_REPO, "http://charts.internal:8080/hami", "https://10.0.0.5/charts"])
def test_a_repository_url_names_the_chart_in_it(tmp_path, url):
    assert parse(url, tmp_path) == ChartSource(cs.REPO, HAMI, HAMI_VERSION, url)


def test_the_default_is_the_pinned_repository():
    assert Chart("hami", HAMI, HAMI_VERSION, versions.HAMI_REPO).source == cs.repository(
        HAMI, HAMI_VERSION, versions.HAMI_REPO
    )


@pytest.mark.parametrize("value", ["ftp://charts.example.com/hami", "s3://bucket/charts", "https://has space/x"])
def test_a_url_of_another_scheme_is_refused(tmp_path, value):
    assert "must be an http(s):// chart repository URL, an oci:// reference or a directory" in refused(value, tmp_path)


@pytest.mark.parametrize("value", ["", "   ", None, 3, ["https://x"]])
def test_nothing_or_not_a_string_is_refused(tmp_path, value):
    assert "must be a chart repository URL" in refused(value, tmp_path)


# -- directory -------------------------------------------------------------------------------


def test_a_directory_holding_the_pinned_chart(tmp_path):
    chart = write_chart(tmp_path / "hami")
    assert parse(str(chart), tmp_path) == ChartSource(cs.DIRECTORY, str(chart), HAMI_VERSION)


def test_a_relative_directory_is_read_from_the_project(tmp_path):
    write_chart(tmp_path / "charts" / "hami")
    assert parse("charts/hami", tmp_path).chart == str(tmp_path / "charts" / "hami")


def test_a_missing_directory_is_refused(tmp_path):
    assert (
        refused(str(tmp_path / "nowhere"), tmp_path)
        == f"{tmp_path / 'nowhere'} does not exist; give the unpacked chart's directory"
    )


def test_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "hami-2.8.3.tgz").write_bytes(b"")
    assert "is not a directory" in refused("hami-2.8.3.tgz", tmp_path)


def test_a_directory_without_chart_yaml_is_refused(tmp_path):
    (tmp_path / "hami").mkdir()
    assert refused("hami", tmp_path) == f"{tmp_path / 'hami'} has no Chart.yaml: give the unpacked chart's directory"


def test_unreadable_chart_yaml_is_refused(tmp_path):
    (tmp_path / "hami").mkdir()
    (tmp_path / "hami" / "Chart.yaml").write_text("name: [hami\n")
    assert "cannot be read as YAML" in refused("hami", tmp_path)


def test_another_chart_is_refused(tmp_path):
    write_chart(tmp_path / "hami", name="volcano")
    assert "names chart 'volcano'; this key takes 'hami'" in refused("hami", tmp_path)


def test_another_version_is_refused(tmp_path):
    write_chart(tmp_path / "hami", version="2.9.0")
    assert "is version '2.9.0'; the stack pins hami 2.8.3" in refused("hami", tmp_path)


KAMAJI_WITH_ETCD = {"dependencies": [{"name": "kamaji-etcd", "version": ">=0.15.0", "repository": "https://x"}]}


def kamaji_dir(tmp_path: Path) -> Path:
    return write_chart(tmp_path / "kamaji", name="kamaji", version=KAMAJI_VERSION, **KAMAJI_WITH_ETCD)


def test_a_missing_dependency_is_refused_naming_it(tmp_path):
    kamaji_dir(tmp_path)
    msg = refused("kamaji", tmp_path, chart="kamaji", version=KAMAJI_VERSION)
    assert "lacks its dependencies kamaji-etcd >=0.15.0 under charts/" in msg
    assert "helm dependency build kamaji" in msg


def test_a_dependency_unpacked_under_charts(tmp_path):
    write_chart(kamaji_dir(tmp_path) / "charts" / "kamaji-etcd", name="kamaji-etcd", version="0.15.2")
    assert parse("kamaji", tmp_path, chart="kamaji", version=KAMAJI_VERSION).kind == cs.DIRECTORY


def test_a_dependency_packaged_under_charts(tmp_path):
    etcd = write_chart(tmp_path / "src" / "kamaji-etcd", name="kamaji-etcd", version="0.15.2")
    (kamaji_dir(tmp_path) / "charts").mkdir()
    package(etcd, tmp_path / "kamaji" / "charts" / "kamaji-etcd-0.15.2.tgz")
    assert parse("kamaji", tmp_path, chart="kamaji", version=KAMAJI_VERSION).kind == cs.DIRECTORY


def test_a_dependency_is_found_by_its_own_chart_name_not_the_file_name(tmp_path):
    # Helm matches dependencies by the name in their Chart.yaml: a chart "kamaji" with a
    # dependency "kamaji" is not satisfied by kamaji-etcd's archive, whose name merely starts alike.
    write_chart(tmp_path / "umbrella", name="umbrella", version="1.0.0", dependencies=[{"name": "kamaji"}])
    etcd = write_chart(tmp_path / "src" / "kamaji-etcd", name="kamaji-etcd", version="0.15.2")
    (tmp_path / "umbrella" / "charts").mkdir()
    package(etcd, tmp_path / "umbrella" / "charts" / "kamaji-etcd-0.15.2.tgz")
    assert "lacks its dependencies kamaji under charts/" in refused("umbrella", tmp_path, "umbrella", "1.0.0")
    write_chart(tmp_path / "umbrella" / "charts" / "renamed", name="kamaji", version="0.0.0")
    assert parse("umbrella", tmp_path, "umbrella", "1.0.0").kind == cs.DIRECTORY


def test_a_broken_archive_does_not_count_as_the_dependency(tmp_path):
    (kamaji_dir(tmp_path) / "charts").mkdir()
    (tmp_path / "kamaji" / "charts" / "kamaji-etcd-0.15.2.tgz").write_bytes(b"not a tarball")
    assert "lacks its dependencies kamaji-etcd" in refused("kamaji", tmp_path, chart="kamaji", version=KAMAJI_VERSION)


def test_an_apiversion_v1_chart_declares_its_dependencies_in_requirements_yaml(tmp_path):
    chart = tmp_path / "hami"
    chart.mkdir()
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "name": HAMI, "version": HAMI_VERSION}))
    (chart / "requirements.yaml").write_text(yaml.safe_dump({"dependencies": [{"name": "common", "version": "1"}]}))
    assert "lacks its dependencies common 1" in refused("hami", tmp_path)


# -- OCI -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "oci://registry.example.com/charts/hami:2.8.3",
        "oci://127.0.0.1:5000/hami:2.8.3",
        "oci://localhost:5000/mirror/project-hami/hami:2.8.3",
    ],
)
def test_an_oci_reference_at_the_pinned_tag(tmp_path, value):
    source = parse(value, tmp_path)
    assert source == ChartSource(cs.OCI, value.rsplit(":", 1)[0], HAMI_VERSION)


@pytest.mark.parametrize("tag", ["0.0.0_latest", "0.0.0+latest"])
def test_a_plus_version_is_tagged_with_an_underscore(tmp_path, tag):
    source = parse(f"oci://registry.example.com/charts/kamaji:{tag}", tmp_path, "kamaji", KAMAJI_VERSION)
    # Helm is given the repository and the version; it tags `+` as `_` itself (and refuses a
    # reference whose tag is not the version as given).
    assert (source.chart, source.version) == ("oci://registry.example.com/charts/kamaji", "0.0.0+latest")
    assert cs.oci_tag(KAMAJI_VERSION) == "0.0.0_latest"


def test_an_oci_reference_without_a_tag_is_refused_saying_which(tmp_path):
    msg = refused("oci://registry.example.com/charts/hami", tmp_path)
    assert msg == "names no tag: write the chart version the stack pins, oci://registry.example.com/charts/hami:2.8.3"


def test_a_plus_version_without_a_tag_is_told_its_underscore_tag(tmp_path):
    assert refused("oci://r.example.com/kamaji", tmp_path, "kamaji", KAMAJI_VERSION).endswith(
        "oci://r.example.com/kamaji:0.0.0_latest"
    )


def test_another_tag_is_refused(tmp_path):
    msg = refused("oci://registry.example.com/charts/hami:2.9.0", tmp_path)
    assert msg == "is tagged '2.9.0'; the stack pins hami 2.8.3 (tag 2.8.3)"


def test_another_chart_name_is_refused(tmp_path):
    assert refused("oci://registry.example.com/charts/volcano:2.8.3", tmp_path) == (
        "names chart 'volcano'; this key takes 'hami'"
    )


@pytest.mark.parametrize(
    "value",
    [
        "oci://",
        "oci://registry.example.com",
        "oci://registry.example.com/Charts/hami:2.8.3",
        "oci://registry.example.com/charts/hami@sha256:" + "0" * 64,
        "oci:///charts/hami:2.8.3",
        "oci://user:pass@registry.example.com/hami:2.8.3",
    ],
)
def test_a_malformed_oci_reference_is_refused(tmp_path, value):
    assert refused(value, tmp_path).startswith("must be an OCI reference like oci://registry.example.com/charts/hami:")


def test_a_bad_scheme_is_not_taken_for_oci(tmp_path):
    assert "must be an http(s):// chart repository URL" in refused("oci+http://r.example.com/hami:2.8.3", tmp_path)
    assert "must be an http(s):// chart repository URL" in refused("OCI://r.example.com/hami:2.8.3", tmp_path)
    # without `//` it is no URL at all: a directory, which is not there
    assert "does not exist" in refused("oci:/r.example.com/hami:2.8.3", tmp_path)


# -- what helm.v3.Release is given -------------------------------------------------------------

HAMI_CHART = Chart("hami", HAMI, HAMI_VERSION, versions.HAMI_REPO)


def test_repository_inputs_are_name_version_and_repo():
    given = chart_inputs(HAMI_CHART, None)
    assert (given["chart"], given["version"]) == (HAMI, HAMI_VERSION)
    assert given["repository_opts"].repo == versions.HAMI_REPO
    assert chart_inputs(HAMI_CHART, HAMI_CHART.source).keys() == given.keys()


def test_directory_and_oci_inputs_have_no_repository_options(tmp_path):
    # with repositoryOpts.repo set, Helm looks the name up in that repository and never reads the directory
    chart = write_chart(tmp_path / "hami")
    assert chart_inputs(HAMI_CHART, parse(str(chart), tmp_path)) == {"chart": str(chart), "version": HAMI_VERSION}
    oci = parse("oci://127.0.0.1:5000/charts/hami:2.8.3", tmp_path)
    assert chart_inputs(HAMI_CHART, oci) == {"chart": "oci://127.0.0.1:5000/charts/hami", "version": HAMI_VERSION}


def test_a_source_of_another_version_is_a_wiring_error():
    with pytest.raises(ValueError, match="a source of version 2.9.0 for the pinned 2.8.3"):
        chart_inputs(HAMI_CHART, cs.repository(HAMI, "2.9.0", versions.HAMI_REPO))


def test_the_dev_stack_releases_are_given_what_they_were_before_sources():
    """The default source gives each release exactly the inputs it had (no diff on `up`)."""
    rec = run_program(load_config_file(ROOT / "Pulumi.dev.yaml"))
    expected = {
        "kamaji-cert-manager": ("cert-manager", "v1.18.3", "https://charts.jetstack.io"),
        "kamaji-kamaji": ("kamaji", "0.0.0+latest", "https://clastix.github.io/charts"),
        "team-a-hami-release": ("hami", "2.8.3", "https://project-hami.github.io/HAMi/"),
    }
    for name, (chart, version, repo) in expected.items():
        inputs = rec.named(name).inputs
        assert set(inputs) == {
            "name",
            "chart",
            "version",
            "repositoryOpts",
            "namespace",
            "createNamespace",
            "values",
            "timeout",
            "compat",
        }
        assert (inputs["chart"], inputs["version"], inputs["repositoryOpts"]) == (chart, version, {"repo": repo})
