"""Closed networks: image names in the mirror, the runtime files that send every pull through it,
the keys that configure it (each refused naming itself), the image list of every shipped stack,
and the program's graph with and without a mirror."""

import copy
import json
import tomllib

import pytest
import yaml

from components.config import image_set, versions
from components.config.image_refs import STANDARD_REGISTRIES, ImageRef
from components.config.load import load_stack_config, load_stack_file
from components.config.problems import ConfigError
from components.config.stack_file import resolve
from components.nodes.management_node import INIT_CONFIG_PATH
from components.nodes.registry_mirror import (
    CONTAINERD_CERTS_DIR,
    K3S_MIRROR_CA,
    K3S_REGISTRIES,
    Mirror,
    containerd_files,
    hosts_toml,
    k3s_registries_yaml,
)
from components.reports import image_list
from tests.support.certs import self_signed_ca_pem
from tests.support.harness import ROOT, load_config_file, run_program

DEV = load_config_file(ROOT / "Pulumi.dev.yaml")
STACK_FILES = sorted([*ROOT.glob("Pulumi.*.yaml"), *ROOT.glob("examples/Pulumi.*.yaml")])
STACK_FILES = [p for p in STACK_FILES if p.name != "Pulumi.yaml"]


CA = self_signed_ca_pem("mirror-ca")


@pytest.mark.parametrize(
    ("ref", "registry", "repository", "tag", "digest"),
    [
        ("busybox", "docker.io", "library/busybox", "", ""),
        ("busybox:1.36", "docker.io", "library/busybox", "1.36", ""),
        ("docker.io/library/busybox:1.36", "docker.io", "library/busybox", "1.36", ""),
        ("index.docker.io/rancher/k3s:v1", "docker.io", "rancher/k3s", "v1", ""),
        ("rancher/k3s:v1.35.0-k3s1", "docker.io", "rancher/k3s", "v1.35.0-k3s1", ""),
        ("registry.k8s.io/kube-apiserver:v1.35.1", "registry.k8s.io", "kube-apiserver", "v1.35.1", ""),
        ("localhost/app:1", "localhost", "app", "1", ""),
        ("reg.example.com:5000/team/app", "reg.example.com:5000", "team/app", "", ""),
        ("kindest/node:v1.36.1@sha256:" + "a" * 64, "docker.io", "kindest/node", "v1.36.1", "sha256:" + "a" * 64),
    ],
)
def test_references_are_split_as_docker_does(ref, registry, repository, tag, digest):
    assert ImageRef.parse(ref) == ImageRef(registry, repository, tag, digest)


def test_each_registry_keeps_its_own_path_in_the_mirror():
    assert (
        ImageRef.parse("busybox:1.36").in_mirror("172.17.0.1:5000") == "172.17.0.1:5000/docker.io/library/busybox:1.36"
    )
    a = ImageRef.parse("quay.io/library/busybox:1").in_mirror("m:5000")
    b = ImageRef.parse("docker.io/library/busybox:1").in_mirror("m:5000")
    assert a != b  # same repository name upstream, two registries: never one image in the mirror


def test_containerd_asks_the_mirror_for_the_upstream_path_of_every_registry():
    files = containerd_files(Mirror("http://172.17.0.1:5000"), ["nvcr.io", *STANDARD_REGISTRIES])
    assert set(files) == {f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml" for r in [*STANDARD_REGISTRIES, "nvcr.io"]}
    doc = tomllib.loads(files[f"{CONTAINERD_CERTS_DIR}/registry.k8s.io/hosts.toml"])
    host = doc["host"]["http://172.17.0.1:5000/v2/registry.k8s.io"]
    assert host["override_path"] is True
    assert host["capabilities"] == ["pull", "resolve"]
    assert "ca" not in host


def test_over_https_each_registry_names_the_mirrors_ca():
    files = containerd_files(Mirror("https://mirror.example.com", CA), ["docker.io"])
    doc = tomllib.loads(files[f"{CONTAINERD_CERTS_DIR}/docker.io/hosts.toml"])
    ca = doc["host"]["https://mirror.example.com/v2/docker.io"]["ca"]
    assert files[ca] == CA


def test_k3s_rewrites_each_registry_into_its_path():
    doc = yaml.safe_load(k3s_registries_yaml(Mirror("https://m.example.com:8443", CA), ["quay.io"]))
    assert doc["mirrors"]["quay.io"] == {
        "endpoint": ["https://m.example.com:8443"],
        "rewrite": {"^(.*)$": "quay.io/$1"},
    }
    assert doc["configs"]["m.example.com:8443"]["tls"]["ca_file"] == K3S_MIRROR_CA


def _with(**keys) -> dict:
    raw = {k.removeprefix("gpu-tenancy:"): v for k, v in copy.deepcopy(DEV).items()}
    raw.update(keys)
    return raw


def _problems(**keys) -> str:
    with pytest.raises(ConfigError) as exc:
        load_stack_config("gpu-tenancy", _with(**keys), base=ROOT)
    return str(exc.value)


@pytest.mark.parametrize(
    ("mirror", "key", "says"),
    [
        ({"endpoint": "http://172.17.0.1:5000/v2"}, "mirror.endpoint", "without a path"),
        ({"endpoint": "https://m.example.com/"}, "mirror.endpoint", "without a path"),
        ({"endpoint": "ftp://m.example.com"}, "mirror.endpoint", "http:// or https://"),
        ({"endpoint": "http://user:pw@m.example.com"}, "mirror.endpoint", "credentials"),
        ({"endpoint": "http://m.example.com:99999"}, "mirror.endpoint", "invalid port"),
        ({"endpoint": "m.example.com:5000"}, "mirror.endpoint", "http:// or https://"),
        ({}, "mirror.endpoint", "required"),
        ({"endpoint": "http://m:5000", "caCert": CA}, "mirror.caCert", "only over https"),
        ({"endpoint": "https://m:5000", "caCert": "/etc/ssl/ca.pem"}, "mirror.caCert", "PEM"),
        ({"endpoint": "https://m:5000", "caCert": CA.replace("M", "N", 3)}, "mirror.caCert", "not a readable PEM"),
        ({"endpoint": "https://m:5000", "registries": ["nvcr.io/x"]}, "mirror.registries[0]", "registry host"),
        ({"endpoint": "https://m:5000", "mirrors": []}, "mirror.mirrors", ""),
    ],
)
def test_a_bad_mirror_key_is_refused_naming_it(mirror, key, says):
    text = _problems(mirror=mirror)
    assert f"gpu-tenancy:{key}" in text
    assert says in text


@pytest.mark.parametrize(
    ("images", "key", "says"),
    [
        ({"k3s": "rancher/k3s"}, "images.k3s", "tag or a digest"),
        ({"kwok": "registry.example.com/kwok/kwok"}, "images.kwok", "tag or a digest"),
        ({"releaserBase": "Python:3.11"}, "images.releaserBase", "image reference"),
        ({"pythonIndex": "pypi.example.com/simple"}, "images.pythonIndex", "http(s)://"),
        ({"pythonIndexCaCert": "/etc/ssl/certs/ca-certificates.crt"}, "images.pythonIndexCaCert", "PEM"),
        ({"pythonIndexCaCert": CA.replace("M", "N", 3)}, "images.pythonIndexCaCert", "not a readable PEM"),
        ({"nodes": {"v1.34.0": "kindest/node:v1.34.0"}}, "images.nodes", "names no pinned tenant version"),
        ({"nodes": {"v1.35.1": "kindest/node"}}, "images.nodes", "tag or a digest"),
    ],
)
def test_a_bad_image_key_is_refused_naming_it(images, key, says):
    text = _problems(images=images)
    assert f"gpu-tenancy:{key}" in text
    assert says in text


def test_a_chart_source_is_checked_before_anything_exists(tmp_path):
    empty = tmp_path / "hami"
    empty.mkdir()
    text = _problems(charts={"hami": str(empty), "kamaji": "oci://172.17.0.1:5000/charts/kamaji"})
    assert "gpu-tenancy:charts.hami" in text and "no Chart.yaml" in text
    assert "gpu-tenancy:charts.kamaji" in text and "names no tag" in text


def test_no_closed_network_key_leaves_the_defaults():
    cfg = load_stack_config("gpu-tenancy", _with(), base=ROOT)
    assert cfg.mirror is None
    assert cfg.images.k3s == versions.K3S_IMAGE and cfg.images.kwok == versions.KWOK_IMAGE
    assert {k: (s.kind, s.repo) for k, s in cfg.charts.items()} == {
        "certManager": ("repo", versions.CERT_MANAGER_REPO),
        "kamaji": ("repo", versions.KAMAJI_REPO),
        "hami": ("repo", versions.HAMI_REPO),
        "kamajiEtcd": ("repo", versions.KAMAJI_REPO),
    }


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_the_image_list_names_every_image_of_each_shipped_stack_exactly(path, capsys):
    cfg = load_stack_file(path, secrets_set=True)
    assert image_list.main(["--stack", str(path), "--refs"]) == 0
    refs = capsys.readouterr().out.split()
    assert len(refs) == len(set(refs))
    for ref in refs:
        parsed = ImageRef.parse(ref)
        assert parsed.name == ref and (parsed.tag or parsed.digest), ref
    for t in cfg.tenants:
        assert f"registry.k8s.io/kube-apiserver:{t.kubernetes_version}" in refs
        assert {ImageRef.parse(w.image).name for w in t.workloads} <= set(refs)
        if t.docker_nodes:
            assert ImageRef.parse(t.worker_image(cfg.cluster.node_image, cfg.images.nodes)).name in refs
    assert image_list.main(["--stack", str(path)]) == 0
    table = capsys.readouterr().out
    for key, source in image_set.charts(cfg):
        assert key in table and source.version in table


def test_the_mirror_carries_every_registry_the_nodes_pull_from():
    cfg = load_stack_config(
        "gpu-tenancy", _with(mirror={"endpoint": "http://172.17.0.1:5000", "registries": ["nvcr.io"]}), base=ROOT
    )
    registries = set(image_set.mirror_registries(cfg))
    assert {*STANDARD_REGISTRIES, "nvcr.io"} <= registries
    pulled = {ImageRef.parse(n.ref).registry for n in image_set.images(cfg) if n.puller in image_set.MIRRORED}
    assert pulled <= registries


def _uploads(rec, typ="docker:index/container:Container"):
    return {r.name: r.inputs.get("uploads") for r in rec.of_type(typ)}


def _k3s(config: dict) -> dict:
    config["gpu-tenancy:cluster"] = {**config.get("gpu-tenancy:cluster", {}), "distribution": "k3s"}
    return config


def test_without_a_mirror_no_container_gets_files():
    rec = run_program(copy.deepcopy(DEV))
    assert {name: up for name, up in _uploads(rec).items() if up and "worker" in name} == {}
    # The management node gets its init configuration only.
    assert [u["file"] for u in _uploads(rec)["management-node"]] == [INIT_CONFIG_PATH]
    rec = run_program(_k3s(copy.deepcopy(DEV)))
    assert _uploads(rec)["management-k3s"] is None
    assert "--disable-default-registry-endpoint" not in rec.named("management-k3s").inputs["command"]


def _mirrored(registries: str | set[str]) -> set[str]:
    return {f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml" for r in registries}


def test_with_a_mirror_every_node_starts_with_it():
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:mirror"] = {"endpoint": "http://172.17.0.1:5000"}
    rec = run_program(config)
    uploads = _uploads(rec)
    management = {u["file"]: u["content"] for u in uploads["management-node"]}
    assert _mirrored(STANDARD_REGISTRIES) <= set(management)
    for r in STANDARD_REGISTRIES:
        assert management[f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml"] == hosts_toml(Mirror("http://172.17.0.1:5000"), r)
    workers = [name for name in uploads if name.endswith("-container") and "worker" in name]
    assert workers
    for name in workers:
        files = {u["file"] for u in uploads[name]}
        assert _mirrored(STANDARD_REGISTRIES) <= files

    rec = run_program(_k3s(copy.deepcopy(config)))
    k3s = {u["file"]: u["content"] for u in _uploads(rec)["management-k3s"]}
    assert json.loads(k3s[K3S_REGISTRIES])["mirrors"]["registry.k8s.io"]["endpoint"] == ["http://172.17.0.1:5000"]
    assert "--disable-default-registry-endpoint" in rec.named("management-k3s").inputs["command"]


def test_the_python_index_and_its_ca_reach_the_release_controllers_build():
    """pip behind a TLS-inspecting proxy, or a mirror with a private CA, fails the build with
    CERTIFICATE_VERIFY_FAILED unless it is given that CA (seen on the first whole run)."""
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:images"] = {"pythonIndex": "https://pypi.example.com/simple", "pythonIndexCaCert": CA}
    args = run_program(config).named("releaser-image").inputs["build"]["args"]
    assert args == {
        "BASE_IMAGE": versions.RELEASER_BASE_IMAGE,
        "PIP_INDEX_URL": "https://pypi.example.com/simple",
        "PIP_CA_PEM": CA,
    }
    dockerfile = (ROOT / "components/controllers/release/Dockerfile").read_text()
    assert "ARG PIP_CA_PEM" in dockerfile and "PIP_CERT=/tmp/pip-ca.pem" in dockerfile
    assert "rm -f /tmp/pip-ca.pem" in dockerfile  # kept only for the install


def test_image_and_chart_keys_reach_the_resources(tmp_path):
    chart = tmp_path / "hami"
    chart.mkdir()
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: hami\nversion: {versions.HAMI_CHART_VERSION}\n")
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:images"] = {
        "k3s": "registry.example.com/rancher/k3s:v1.35.0-k3s1",
        "nodes": {"v1.35.1": "registry.example.com/kindest/node:v1.35.1"},
    }
    config["gpu-tenancy:charts"] = {
        "hami": str(chart),
        "kamaji": "oci://registry.example.com/charts/kamaji:0.0.0_latest",
    }
    config["gpu-tenancy:images"]["management"] = "registry.example.com/gpu-tenancy/node:v1.35.1"
    rec = run_program(config)
    assert rec.named("management-node-image").inputs["name"] == "registry.example.com/gpu-tenancy/node:v1.35.1"
    assert run_program(_k3s(copy.deepcopy(config))).named("management-k3s-image").inputs["name"] == (
        "registry.example.com/rancher/k3s:v1.35.0-k3s1"
    )
    assert rec.named("team-a-worker-0-image").inputs["name"] == "registry.example.com/kindest/node:v1.35.1"
    releases = {r.name: r.inputs for r in rec.of_type("kubernetes:helm.sh/v3:Release")}
    hami = next(v for k, v in releases.items() if k.startswith("team-a") and "hami" in k)
    assert hami["chart"] == str(chart)
    kamaji = releases["kamaji-kamaji"]
    assert kamaji["chart"] == "oci://registry.example.com/charts/kamaji"
    assert kamaji["version"] == versions.KAMAJI_CHART_VERSION


def test_paths_in_the_list_module_are_the_projects():
    assert resolve("dev", ROOT).path == ROOT / "Pulumi.dev.yaml"
    fleet = resolve(str(ROOT / "examples/Pulumi.fleet.yaml"), ROOT)
    assert (fleet.path, fleet.name, fleet.root, fleet.project) == (
        ROOT / "examples/Pulumi.fleet.yaml",
        "fleet",
        ROOT,
        "gpu-tenancy",
    )


def _graph(rec) -> dict[str, tuple]:
    return {r.urn: (r.inputs, sorted(r.dependencies), r.provider) for r in rec.registrations}


def test_the_defaults_written_out_give_the_graph_no_key_gives():
    """Setting nothing is setting upstream's images and repositories: the same resources with the
    same inputs, so a stack that names none of the keys previews as before."""
    plain = run_program(copy.deepcopy(DEV))
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:images"] = {
        "management": f"{versions.LAB_NODE_REPOSITORY}:{versions.MANAGEMENT_KUBERNETES_VERSION}",
        "k3s": versions.K3S_IMAGE,
        "kwok": versions.KWOK_IMAGE,
        "releaserBase": versions.RELEASER_BASE_IMAGE,
        "nodes": dict(versions.KIND_NODE_IMAGES),
    }
    config["gpu-tenancy:charts"] = {
        "certManager": versions.CERT_MANAGER_REPO,
        "kamaji": versions.KAMAJI_REPO,
        "hami": versions.HAMI_REPO,
    }
    assert _graph(run_program(config)) == _graph(plain)


def test_an_oci_chart_on_a_mirror_with_its_own_ca_is_warned_about():
    cfg = load_stack_config(
        "gpu-tenancy",
        _with(
            mirror={"endpoint": "https://m.example.com:5000", "caCert": CA},
            charts={"hami": f"oci://m.example.com:5000/charts/hami:{versions.HAMI_CHART_VERSION}"},
        ),
        base=ROOT,
    )
    (warning,) = [w for w in cfg.warnings if w.startswith("charts.hami")]
    assert "SSL_CERT_FILE" in warning
