"""The lab's node image can be built at every pinned tenant version: each has a wrapper module
requiring exactly that Kubernetes release, every staging module replaced by its published
v0.<minor>.<patch> (go.sum pinned), and the build script names the same repository as the config."""

from __future__ import annotations

import re
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
    for cmd in ("kubelet", "kubeadm", "kubectl"):
        assert f'"k8s.io/kubernetes/cmd/{cmd}"' in (module / "tools.go").read_text()


def test_no_module_for_a_version_nobody_pins():
    assert {p.name for p in NODE_MODULES.iterdir()} == set(KIND_NODE_IMAGES)


def test_the_build_and_the_tests_use_the_config_s_repository_and_versions():
    script = (ROOT / "tools/images/build.sh").read_text()
    assert "LAB_NODE_REPOSITORY" in script and "KIND_NODE_IMAGES" in script
    assert LAB_NODE_REPOSITORY == "gpu-tenancy/node" and DEFAULT_TENANT_VERSION in KIND_NODE_IMAGES
