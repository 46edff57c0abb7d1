"""Every Kubernetes binary tools/build.sh builds reports its pinned version (version ldflags): one
built from modules without them says v0.0.0-master, which kubeadm's version and skew checks refuse."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.tools import ROOT, require

pytestmark = pytest.mark.integration


def pinned(key: str) -> str:
    values = dict(line.split("=", 1) for line in (ROOT / "tools/versions.env").read_text().splitlines() if "=" in line)
    return values[key]


@pytest.mark.parametrize("binary", ["kube-apiserver", "kube-controller-manager", "kube-scheduler"])
def test_kubernetes_binaries_report_the_pinned_version(tools, binary):
    require(tools, binary)
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, env=tools, check=True).stdout
    assert out.strip() == f"Kubernetes v{pinned('KUBERNETES_VERSION')}"


def test_helm_is_the_helm_the_kubernetes_provider_vendors(tools):
    """The CLI that packages and pushes charts is the Helm whose client the provider pulls them with."""
    require(tools, "helm")
    helm = pinned("HELM_VERSION")
    assert f"\thelm.sh/helm/v3 v{helm} " in (ROOT / "tools/go/kubernetes/go.mod").read_text()
    out = subprocess.run(["helm", "version", "--short"], capture_output=True, text=True, env=tools, check=True).stdout
    assert out.strip() == f"v{helm}"
