"""The controllers' image, built as the stack builds it (its Dockerfile, the project root as the
context, the stack's own build arguments), holds exactly the modules its two programs import, and
runs the release controller as the stack runs it: as nobody, as its own ServiceAccount with its
write policies, its kubeconfig an uploaded file, across a Docker network to a real API server. It
becomes healthy by the image's own HEALTHCHECK, releases a pod HAMi left allocating with no manual
step, and keeps its token in its own file."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.config.versions import LAB_PYTHON_IMAGE
from components.domain import hami_annotations as ha
from components.nodes.node_container import files_archive
from components.platform.release_controller_image import DOCKERFILE, ReleaseControllerImageArgs, build_args
from components.tenant.release_controller import KUBECONFIG_PATH, RUN_AS, SCRAPE, TOKEN_DIR
from tests.support.cluster import TestCluster as Cluster
from tests.support.cluster import add_node, start_cluster
from tests.support.docker_lab import DockerLab, docker, missing
from tests.support.hami_stand_in import hami_bind, new_pod, wait_released
from tests.support.image_contents import ROOT, image_files
from tests.support.release_account import ACCOUNT, NAMESPACE, release_account
from tests.support.tools import require, tools_env
from tests.support.waits import settles

pytestmark = pytest.mark.docker

# What pip in the build trusts instead of the base image's bundle: the CAs this host's
# administrator added (a TLS-inspecting proxy's, a mirror's), as a closed network's operator passes
# its mirror's CA; none where the host added none (pip's own bundle then). A named file wins.
PIP_CA_ENV = "GPU_TENANCY_PIP_CA"
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
MEMORY_MIB = 256
# Whose token a file holds, read inside the container with the image's own code.
READ_ACCOUNT = (
    "import sys; from components.kube.bound_token import account_of; "
    "print('/'.join(account_of(open(sys.argv[1]).read().strip())))"
)


def pip_cas() -> str | None:
    named = os.environ.get(PIP_CA_ENV)
    files = [Path(named)] if named else sorted(LOCAL_CAS.rglob("*.crt"))
    return "".join(f.read_text() for f in files) or None


@pytest.fixture(scope="module")
def controllers_image(engine: None) -> Iterator[str]:
    if not docker("image", "inspect", "--format", "{{.Id}}", LAB_PYTHON_IMAGE, check=False):
        missing(f"no {LAB_PYTHON_IMAGE} image (build it: tools/images/build.sh python)")
    tag = f"gpu-tenancy/release-controller:test-{uuid.uuid4().hex[:6]}"
    args = build_args(
        ReleaseControllerImageArgs(
            base_image=LAB_PYTHON_IMAGE, python_index=os.environ.get("PIP_INDEX_URL"), python_index_ca=pip_cas()
        )
    )
    flags = [arg for key, value in args.items() for arg in ("--build-arg", f"{key}={value}")]
    start = time.monotonic()
    docker("build", "--quiet", "-f", str(ROOT / DOCKERFILE), "-t", tag, *flags, str(ROOT), timeout=900)
    print(f"\n[measured] controllers' image built in {time.monotonic() - start:.0f} s")
    yield tag
    docker("image", "rm", "--force", tag, check=False)


@pytest.fixture(scope="module")
def cluster(engine: None, lab: DockerLab) -> Iterator[Cluster]:
    """An API server on the lab network's gateway, which the controller's container reaches."""
    tools = tools_env()
    require(tools, "kube-apiserver", "etcd", "openssl", skip=missing)
    c = start_cluster(tools, address=lab.gateway, api_args=["--allow-privileged=true"])
    yield c
    c.stop()


@pytest.fixture(scope="module")
def controller(controllers_image: str, cluster: Cluster, lab: DockerLab) -> Iterator[str]:
    server = f"https://{lab.gateway}:{cluster.port}"
    with release_account(cluster, server) as kubeconfig:
        name = f"{lab.prefix}-releaser"
        cid = docker(
            "create", "--name", name, "--network", lab.network, "--user", RUN_AS,
            "--memory", f"{MEMORY_MIB}m", "--memory-swap", f"{MEMORY_MIB}m", controllers_image,
        )  # fmt: skip
        try:
            # The stack's upload: readable by the controller's user alone.
            tar = files_archive([(KUBECONFIG_PATH, kubeconfig)], mode=0o400, owner=int(RUN_AS))
            proc = subprocess.run(["docker", "cp", "-", f"{cid}:/"], input=tar, capture_output=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            docker("start", cid)
            yield cid
        finally:
            print(docker("logs", "--tail", "20", cid, check=False))
            docker("rm", "--force", "--volumes", cid, check=False)


def health(cid: str) -> str:
    state = json.loads(docker("inspect", "--format", "{{json .State}}", cid))
    if not state["Running"]:
        raise AssertionError(f"the controller exited {state['ExitCode']}: {docker('logs', '--tail', '30', cid)}")
    return (state.get("Health") or {}).get("Status", "")


def test_the_image_holds_exactly_the_modules_its_programs_import(controllers_image):
    listing = "import pathlib; print('\\n'.join(sorted(str(p) for p in pathlib.Path('components').rglob('*.py'))))"
    found = docker("run", "--rm", "--entrypoint", "python", controllers_image, "-c", listing).splitlines()
    files, _ = image_files()
    assert set(found) == files


def test_the_release_controller_in_the_image_releases_a_pod(controller, cluster):
    assert settles(lambda: health(controller) == "healthy", timeout=120, interval=2), health(controller)
    core = cluster.core()
    add_node(cluster, "gpu-image-0")
    new_pod(core, "default", "in-image")
    hami_bind(core, "default", "in-image", "gpu-image-0")
    wait_released(core, "default", "in-image", "gpu-image-0", timeout=60)
    annotations = core.read_namespaced_pod("in-image", "default").metadata.annotations
    assert annotations[ha.BIND_PHASE] == ha.PHASE_SUCCESS
    # Its own count, read inside the container as the stack's `metrics` output reads it.
    metrics = docker("exec", controller, *SCRAPE.split())
    finished = {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "gpu_tenancy_releases"
        for sample in family.samples
        if sample.name == "gpu_tenancy_releases_total"
    }
    assert finished.get("released", 0) + finished.get("succeeded", 0) >= 1, finished
    usage = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", controller).split("/")[0].strip()
    print(f"\n[measured] the release controller in its image: {usage} of its {MEMORY_MIB} MiB cap")


def test_it_keeps_its_token_in_a_file_of_its_own(controller):
    """The image's --token-file: the account's token, readable by the controller's user alone."""
    token = f"{TOKEN_DIR}/token"

    def written() -> bool:
        return subprocess.run(["docker", "exec", controller, "test", "-s", token], timeout=30).returncode == 0

    assert settles(written, timeout=60, interval=1), f"no {token}"
    mode = docker("exec", controller, "stat", "-c", "%a %u", token)
    assert mode == f"600 {RUN_AS}", mode
    claims = docker("exec", controller, "python", "-c", READ_ACCOUNT, token)
    assert claims == f"{NAMESPACE}/{ACCOUNT}", claims
