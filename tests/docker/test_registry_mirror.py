"""A closed network's pulls: a node from the lab's node image, started with the mirror's
containerd files, pulls an image by its upstream name from the lab's registry (tools/lab/registry.sh,
filled by tools/lab/mirror-push.sh), and with the registry stopped a pull fails naming the mirror.

The registry listens on the Docker bridge network's gateway on a port of its own, with its cache
in the test's temporary directory (a registry of the user's is left alone); the node sits on the
lab's network and reaches it through the host. Nothing here is asked of any other address."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.config.image_refs import STANDARD_REGISTRIES, ImageRef
from components.ops.registry_mirror import CONTAINERD_CERTS_DIR, Mirror, containerd_files
from tests.support.docker_lab import BUSYBOX, ROOT, docker, missing
from tests.support.lab_join import join_worker, node_ready
from tests.support.waits import settles

pytestmark = pytest.mark.docker

REGISTRY_SH = ROOT / "tools/lab/registry.sh"
MIRROR_PUSH = ROOT / "tools/lab/mirror-push.sh"
# The upstream name the pods ask for; pushed into the mirror from the lab's own busybox.
UPSTREAM = "docker.io/library/busybox:1.36"
# An upstream name the mirror never had.
ABSENT = "docker.io/library/busybox:1.37"


@dataclass
class Registry:
    endpoint: str
    env: dict[str, str]
    log: Path

    @property
    def host(self) -> str:
        return Mirror(self.endpoint).host

    def script(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(REGISTRY_SH), *args], env=self.env, capture_output=True, text=True, timeout=120
        )


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(engine, tmp_path_factory) -> Iterator[Registry]:
    for tool, package in (("docker-registry", "docker-registry"), ("skopeo", "skopeo")):
        if shutil.which(tool) is None:
            missing(f"no {tool} (apt-get install {package})")
    gateway = docker("network", "inspect", "bridge", "--format", "{{(index .IPAM.Config 0).Gateway}}")
    cache = tmp_path_factory.mktemp("registry-cache")
    env = {**os.environ, "GPU_TENANCY_CACHE": str(cache)}
    reg = Registry(endpoint="", env=env, log=cache / "registry/registry.log")
    listen = f"{gateway}:{_free_port(gateway)}"
    started = reg.script("start", "--listen", listen)
    assert started.returncode == 0, started.stderr
    reg.endpoint = started.stdout.strip()
    assert reg.endpoint == f"http://{listen}"
    try:
        yield reg
    finally:
        stopped = reg.script("stop")
        assert stopped.returncode == 0, stopped.stderr


@pytest.fixture(scope="module")
def mirrored(registry) -> Iterator[str]:
    """UPSTREAM in the mirror: the lab's busybox tagged under that name locally (unless the engine
    already has an image of that name, which is then pushed as it is), then mirror-push.sh."""
    if not docker("image", "inspect", "--format", "{{.Id}}", BUSYBOX, check=False):
        missing(f"no {BUSYBOX} (build it: tools/images/build.sh busybox)")
    tagged = not docker("image", "inspect", "--format", "{{.Id}}", UPSTREAM, check=False)
    if tagged:
        docker("tag", BUSYBOX, UPSTREAM)
    try:
        start = time.monotonic()
        proc = subprocess.run(
            ["bash", str(MIRROR_PUSH), registry.host, UPSTREAM], capture_output=True, text=True, timeout=300
        )
        print(f"\n[measured] mirror-push.sh {time.monotonic() - start:.1f} s: {proc.stderr.strip()}")
        assert proc.returncode == 0, proc.stderr
        assert f"{UPSTREAM} -> {ImageRef.parse(UPSTREAM).in_mirror(registry.host)}" in proc.stderr
        assert "plain HTTP" in proc.stderr
        yield UPSTREAM
    finally:
        if tagged:
            docker("image", "rm", UPSTREAM, check=False)


@pytest.fixture(scope="module")
def files(registry) -> dict[str, str]:
    return containerd_files(Mirror(registry.endpoint), STANDARD_REGISTRIES)


@pytest.fixture(scope="module")
def node(control_plane, lab, image, files) -> str:
    name = lab.start_node("mirror", image, files=files)
    join_worker(control_plane, lab, name)
    core = control_plane.core()
    assert settles(lambda: node_ready(core, name), timeout=120, interval=1), f"{name} not Ready"
    return name


def _pod(core, name: str, node: str, image: str) -> None:
    core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": image, "imagePullPolicy": "Always", "command": ["sleep", "3600"]}
                ],
            },
        },
    )


def test_the_node_starts_with_the_mirror_s_files(node, lab, files):
    assert set(files) == {f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml" for r in STANDARD_REGISTRIES}
    for path, content in files.items():
        assert lab.exec(node, "cat", path) + "\n" == content


def test_a_pod_naming_an_upstream_image_runs_from_the_mirror(control_plane, node, registry, mirrored):
    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "from-mirror", node, mirrored)

    def running() -> bool:
        return core.read_namespaced_pod("from-mirror", "default").status.phase == "Running"

    assert settles(running, timeout=120, interval=0.5), core.read_namespaced_pod("from-mirror", "default").status
    seconds = time.monotonic() - start
    wanted = "/v2/docker.io/library/busybox/manifests/1.36"
    lines = [line for line in registry.log.read_text().splitlines() if wanted in line and "containerd" in line]
    assert lines, f"the registry's log has no request for {wanted}:\n{registry.log.read_text()[-3000:]}"
    access = [line for line in lines if '"HEAD ' in line or '"GET ' in line] or lines
    print(f"\n[measured] pod Running {seconds:.1f} s after creation; registry log: {access[0]}")


def test_with_the_mirror_stopped_a_pull_fails_naming_the_mirror(control_plane, node, registry, mirrored):
    stopped = registry.script("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert registry.script("status").returncode == 3
    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "mirror-down", node, ABSENT)
    found: list[str] = []

    def failed() -> bool:
        events = core.list_namespaced_event("default", field_selector="involvedObject.name=mirror-down").items
        found[:] = [e.message for e in events if e.reason == "Failed" and "Failed to pull image" in (e.message or "")]
        return bool(found)

    assert settles(failed, timeout=120, interval=0.5), [
        (e.reason, e.message)
        for e in core.list_namespaced_event("default", field_selector="involvedObject.name=mirror-down").items
    ]
    seconds = time.monotonic() - start
    print(f"\n[measured] pull failed {seconds:.1f} s after creation; event: {found[0]}")
    assert registry.host in found[0], found[0]

    def waiting() -> str:
        statuses = core.read_namespaced_pod("mirror-down", "default").status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        return state.reason if state else ""

    assert settles(lambda: waiting() in ("ErrImagePull", "ImagePullBackOff"), timeout=60), waiting()
