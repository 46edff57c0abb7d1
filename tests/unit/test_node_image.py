"""The lab's node image and its control-plane images can be built at every pinned tenant version:
each has a wrapper module requiring exactly that Kubernetes release, every staging module replaced
by its published v0.<minor>.<patch> (go.sum pinned), importing every command the images are built
from, and the build script names the same repository as the config."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from components.config.versions import DEFAULT_TENANT_VERSION, KIND_NODE_IMAGES, LAB_NODE_REPOSITORY

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tools/go/node"


@pytest.mark.parametrize("version", list(KIND_NODE_IMAGES))
def test_every_pinned_version_has_a_wrapper_module_of_that_release(version):
    module = NODE_MODULES / version
    go_mod = (module / "go.mod").read_text()
    assert f"\nrequire k8s.io/kubernetes {version}\n" in go_mod
    staging = "v0." + version.split(".", 1)[1]
    replaces = re.findall(r"^replace (k8s\.io/\S+) => (\S+) (\S+)$", go_mod, re.M)
    assert len(replaces) >= 30
    assert all(name == target and pinned == staging for name, target, pinned in replaces), replaces
    assert "k8s.io/kubelet" in dict((n, v) for n, _, v in replaces)
    assert (module / "go.sum").read_text().count(f"k8s.io/kubernetes {version} h1:") == 1


def _script_list(name: str) -> list[str]:
    """A bash array of tools/images/build.sh (`NAME=(a b c)`)."""
    script = (ROOT / "tools/images/build.sh").read_text()
    found = re.findall(rf"^{name}=\(([^)]*)\)$", script, re.M)
    assert len(found) == 1, f"{name} not defined once in tools/images/build.sh"
    return found[0].split()


def test_the_script_builds_the_node_s_binaries_and_the_four_control_plane_images():
    assert _script_list("NODE_BINARIES") == ["kubelet", "kubeadm", "kubectl"]
    assert _script_list("CONTROL_PLANE_COMPONENTS") == [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-proxy",
    ]


def test_kube_proxy_s_image_carries_what_it_calls():
    """kube-proxy runs iptables, ipset, conntrack, modprobe and ip: its image is a Debian rootfs
    with them, not scratch."""
    packages = re.findall(r"^KUBE_PROXY_PACKAGES=(\S+)$", (ROOT / "tools/images/build.sh").read_text(), re.M)
    assert packages and set(packages[0].split(",")) == {"iptables", "conntrack", "ipset", "kmod", "iproute2"}


@pytest.mark.parametrize("version", list(KIND_NODE_IMAGES))
def test_every_wrapper_module_imports_each_command_the_images_are_built_from(version):
    """build_kube builds k8s.io/kubernetes/cmd/<name> in the module: imported from tools.go, so the
    module's requirements and go.sum cover it (no module is looked up at build time)."""
    module = NODE_MODULES / version
    tools_go = (module / "tools.go").read_text()
    assert tools_go.startswith("//go:build tools\n")
    imported = set(re.findall(r'^\s*_ "k8s\.io/kubernetes/cmd/([^"]+)"$', tools_go, re.M))
    assert imported == {*_script_list("NODE_BINARIES"), *_script_list("CONTROL_PLANE_COMPONENTS")}


@pytest.mark.parametrize("version", list(KIND_NODE_IMAGES))
def test_every_required_module_has_its_checksum(version):
    """go.sum holds the content hash of every module go.mod requires (its replacement where a
    staging module is replaced): what `go mod tidy` leaves once every imported command resolves."""
    module = NODE_MODULES / version
    go_mod = (module / "go.mod").read_text()
    replaced = {name: pinned for name, _, pinned in re.findall(r"^replace (\S+) => (\S+) (\S+)$", go_mod, re.M)}
    required = re.findall(r"^\t(\S+) (v\S+)(?: // indirect)?$", go_mod, re.M)
    assert len(required) > 100
    go_sum = set((module / "go.sum").read_text().splitlines())
    lacking = [
        f"{name} {replaced.get(name, v)}"
        for name, v in required
        if not any(line.startswith(f"{name} {replaced.get(name, v)} h1:") for line in go_sum)
    ]
    assert not lacking, f"tools/go/node/{version}/go.sum lacks (run go mod tidy there): {lacking}"


def test_no_module_for_a_version_nobody_pins():
    assert {p.name for p in NODE_MODULES.iterdir()} == set(KIND_NODE_IMAGES)


def test_the_build_and_the_tests_use_the_config_s_repository_and_versions():
    script = (ROOT / "tools/images/build.sh").read_text()
    assert "LAB_NODE_REPOSITORY" in script and "KIND_NODE_IMAGES" in script
    assert LAB_NODE_REPOSITORY == "gpu-tenancy/node" and DEFAULT_TENANT_VERSION in KIND_NODE_IMAGES


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--component", "etcd"], "--component etcd: expected one of kube-apiserver kube-controller-manager"),
        (
            ["--component", "kubelet"],
            "--component kubelet: expected one of kube-apiserver kube-controller-manager kube-scheduler kube-proxy",
        ),
        (["--kubernetes", "v1.34.0"], "no wrapper module tools/go/node/v1.34.0 for Kubernetes v1.34.0"),
    ],
)
def test_control_plane_refuses_what_it_cannot_build_in_one_line(tmp_path, args, says):
    """Before anything is built: a stub docker answers `docker info`, nothing else is called."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "docker").write_text('#!/bin/sh\n[ "$1" = info ] || { echo "unexpected: docker $*" >&2; exit 9; }\n')
    (stub / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "GPU_TENANCY_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        ["bash", str(ROOT / "tools/images/build.sh"), "control-plane", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
