"""Docker tier: lab node containers from the lab's node image, joined to a real control plane by
the project's own join. Needs a Docker engine (started by tools/lab/docker.sh where none answers),
the node image (tools/images/build.sh node), for the mirror's tests the kube-apiserver image
(tools/images/build.sh control-plane), for the controllers' image its Python base
(tools/images/build.sh python) and the tools cache (tools/build.sh); without them each
test is skipped naming what is missing, and fails instead under GPU_TENANCY_REQUIRE_DOCKER=1 (CI).
This machine's kernel tunables are kept put back for the whole session (tools/lab/tunables-guard.sh).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from components.config.versions import DEFAULT_TENANT_VERSION
from tests.support.cluster import TestCluster
from tests.support.docker_lab import DockerLab, TunablesGuard, ensure_engine, missing, node_image, read_tunables
from tests.support.lab_join import start_control_plane
from tests.support.tools import require, tools_env

VERSION = DEFAULT_TENANT_VERSION


@pytest.fixture(scope="session")
def engine() -> None:
    ensure_engine()


@pytest.fixture(scope="session")
def tunables(engine: None) -> Iterator[TunablesGuard]:
    before = read_tunables()
    guard = TunablesGuard()
    yield guard
    guard.stop()
    assert read_tunables() == before, f"kernel tunables not put back: {guard.lines}"


@pytest.fixture(scope="session")
def image(engine: None) -> str:
    return node_image(VERSION)


@pytest.fixture(scope="module")
def lab(engine: None, tunables: TunablesGuard, image: str) -> Iterator[DockerLab]:
    lab = DockerLab().open()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def control_plane(lab: DockerLab, image: str) -> Iterator[TestCluster]:
    tools = tools_env()
    require(tools, "kube-apiserver", "kube-controller-manager", "etcd", "openssl", skip=missing)
    cluster = start_control_plane(tools, lab, image)
    yield cluster
    cluster.stop()
