"""Integration tier fixtures: real upstream binaries built by tools/build.sh.

Every test here needs them; when they are missing the test is skipped and the skip names the
missing binary and the command that builds it. CI builds them, so CI runs this tier.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import TestCluster, add_node, start_cluster
from tests.support.tools import ROOT, PulumiCli, require, tools_env


@pytest.fixture(scope="session")
def tools() -> dict[str, str]:
    return tools_env()


@pytest.fixture(scope="session")
def cluster(tools: dict[str, str]) -> Iterator[TestCluster]:
    require(tools, "kube-apiserver", "etcd", "openssl")
    c = start_cluster(tools)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def with_tokencleaner(tools: dict[str, str]) -> Iterator[TestCluster]:
    """A cluster of its own with kube-controller-manager's token controllers (tokens expire)."""
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    c = start_cluster(tools)
    c.start_controller_manager(["tokencleaner", "bootstrapsigner"])
    yield c
    c.stop()


@pytest.fixture(scope="module")
def with_garbage_collector(tools: dict[str, str]) -> Iterator[TestCluster]:
    """A cluster of its own with kube-controller-manager's garbage collector, as a tenant has:
    the kubernetes provider deletes in the foreground, which waits for it."""
    require(tools, "kube-apiserver", "etcd", "openssl", "kube-controller-manager")
    c = start_cluster(tools)
    c.start_controller_manager(["garbagecollector"])
    yield c
    c.stop()


@pytest.fixture
def node(cluster: TestCluster) -> Iterator[str]:
    """A Ready mock-GPU node of its own for one test, removed after it."""
    from kubernetes import client

    name = f"node-{uuid.uuid4().hex[:6]}"
    add_node(cluster, name)
    yield name
    try:
        cluster.core().delete_node(name)
    except client.ApiException:
        pass


@pytest.fixture
def pulumi_cli(tools: dict[str, str], tmp_path: Path) -> PulumiCli:
    require(tools, "pulumi", "pulumi-language-python")
    state = tmp_path / "state"
    state.mkdir()
    return PulumiCli(tools, state)


@pytest.fixture
def project(pulumi_cli: PulumiCli, tmp_path: Path) -> Path:
    """A copy of the project (program, components, dev stack file) with its own state backend: the
    program as `pulumi` runs it, with a stack `dev` made."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("the program runs in the project's .venv (Pulumi.yaml); run scripts/setup-venv.sh")
    work = tmp_path / "project"
    work.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(ROOT / "components", work / "components", ignore=shutil.ignore_patterns("__pycache__"))
    (work / ".venv").symlink_to(ROOT / ".venv")
    pulumi_cli("stack", "init", "dev", cwd=work)
    return work
