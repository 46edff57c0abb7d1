"""The lab's registry tools without Docker: mirror-push.sh sends each image to the path the
mirror layout gives its upstream name (components.config.image_refs, the one place it is said),
lists what the engine lacks, and turns TLS verification off only for a plain-HTTP mirror;
registry.sh refuses to listen anywhere but loopback or a Docker network's gateway; the containerd
files ask the mirror and never the upstream registry."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from components.config.image_refs import ImageRef
from components.ops.registry_mirror import CONTAINERD_CERTS_DIR, Mirror, containerd_files

ROOT = Path(__file__).resolve().parents[2]
MIRROR_PUSH = ROOT / "tools/lab/mirror-push.sh"
REGISTRY_SH = ROOT / "tools/lab/registry.sh"


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def fake_tools(tmp: Path, present: list[str]) -> dict[str, str]:
    """A docker whose engine has exactly `present`, and a skopeo that records each copy."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (tmp / "present").write_text("".join(f"{ref}\n" for ref in present))
    _stub(
        bin_dir,
        "docker",
        f"""case "$1" in
  info) exit 0 ;;
  image) shift; for last; do :; done; grep -qxF "$last" {tmp}/present ;;
  *) exit 1 ;;
esac
""",
    )
    _stub(bin_dir, "skopeo", f'echo "$*" >> {tmp}/copies\n')
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def push(tmp: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(MIRROR_PUSH), *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def copies(tmp: Path) -> list[str]:
    path = tmp / "copies"
    return path.read_text().splitlines() if path.exists() else []


IMAGES = {
    "registry.k8s.io/pause:3.10.1": "m.lab:5000/registry.k8s.io/pause:3.10.1",
    "busybox:1.36": "m.lab:5000/docker.io/library/busybox:1.36",
    "gpu-tenancy/node:v1.35.1": "m.lab:5000/docker.io/gpu-tenancy/node:v1.35.1",
    "quay.io/jetstack/cert-manager-controller:v1.18.3": "m.lab:5000/quay.io/jetstack/cert-manager-controller:v1.18.3",
    "localhost:5001/team/tool:1": "m.lab:5000/localhost:5001/team/tool:1",
}


def test_each_image_goes_to_its_upstream_path_in_the_mirror(tmp_path):
    env = fake_tools(tmp_path, list(IMAGES))
    proc = push(tmp_path, env, "http://m.lab:5000", *IMAGES)
    assert proc.returncode == 0, proc.stderr
    assert copies(tmp_path) == [
        f"copy --quiet --dest-tls-verify=false docker-daemon:{src} docker://{dest}" for src, dest in IMAGES.items()
    ]
    # The script's mapping is the module's.
    assert all(ImageRef.parse(src).in_mirror("m.lab:5000") == dest for src, dest in IMAGES.items())
    assert "plain HTTP" in proc.stderr and "5 of 5 pushed" in proc.stderr


def test_an_https_mirror_is_verified_and_images_come_on_stdin(tmp_path):
    env = fake_tools(tmp_path, ["busybox:1.36", "quay.io/a/b:latest"])
    proc = push(tmp_path, env, "https://m.lab", stdin="# the lab's images\nbusybox:1.36\n\n  quay.io/a/b  \n")
    assert proc.returncode == 0, proc.stderr
    assert copies(tmp_path) == [
        "copy --quiet docker-daemon:busybox:1.36 docker://m.lab/docker.io/library/busybox:1.36",
        "copy --quiet docker-daemon:quay.io/a/b:latest docker://m.lab/quay.io/a/b:latest",
    ]
    assert "over HTTPS" in proc.stderr


def test_an_image_the_engine_lacks_is_listed_missing_and_fails_the_run(tmp_path):
    env = fake_tools(tmp_path, ["busybox:1.36"])
    proc = push(tmp_path, env, "http://m.lab:5000", "nvcr.io/nvidia/cuda:12", "busybox:1.36", "gone:1")
    assert proc.returncode == 1
    assert copies(tmp_path) == [
        "copy --quiet --dest-tls-verify=false docker-daemon:busybox:1.36 docker://m.lab:5000/docker.io/library/busybox:1.36"
    ]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "missing (not in the local Docker engine): nvcr.io/nvidia/cuda:12 gone:1"


def test_a_digest_reference_is_refused_not_skipped(tmp_path):
    env = fake_tools(tmp_path, [])
    ref = "busybox@sha256:" + "a" * 64
    proc = push(tmp_path, env, "http://m.lab:5000", ref)
    assert proc.returncode == 1 and copies(tmp_path) == []
    assert f"not pushed: {ref} (a digest names content" in proc.stderr


def fake_docker_networks(tmp: Path, gateways: list[str]) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    lines = "".join(f"{g} \\n" for g in gateways)
    _stub(
        bin_dir,
        "docker",
        f"""case "$1 $2" in
  "network ls") echo n1; echo n2 ;;
  "network inspect") printf '{lines}' ;;
  *) exit 1 ;;
esac
""",
    )
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_TENANCY_CACHE": str(tmp / "cache")}


@pytest.mark.parametrize("listen", ["0.0.0.0:5000", "192.168.1.20:5000", "172.17.0.2:5000"])
def test_registry_refuses_an_address_outside_the_host_s_docker_networks(tmp_path, listen):
    env = fake_docker_networks(tmp_path, ["172.17.0.1", "172.30.0.1"])
    proc = subprocess.run(
        ["bash", str(REGISTRY_SH), "start", "--listen", listen], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    addr = listen.rsplit(":", 1)[0]
    assert proc.stderr.splitlines() == [
        f"error: --listen {listen}: {addr} is neither a loopback address nor a Docker network's gateway "
        "(172.17.0.1,172.30.0.1); the registry listens only where this host's containers reach it"
    ]
    assert not (tmp_path / "cache").exists(), "nothing is written before the address is accepted"


@pytest.mark.parametrize("listen", ["172.17.0.1", "172.17.0.1:0", "172.17.0.1:70000", ":5000", "host:port"])
def test_registry_refuses_a_malformed_listen_address(tmp_path, listen):
    env = fake_docker_networks(tmp_path, ["172.17.0.1"])
    proc = subprocess.run(
        ["bash", str(REGISTRY_SH), "start", "--listen", listen], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: --listen {listen}: expected ADDR:PORT (e.g. 172.17.0.1:5000)"]


def test_containerd_asks_the_mirror_only_never_the_upstream():
    """containerd tries each [host], then `server`, which left out is the upstream registry."""
    mirror = Mirror("http://172.17.0.1:5000")
    files = containerd_files(mirror, ["docker.io", "registry.k8s.io"])
    for registry in ("docker.io", "registry.k8s.io"):
        doc = tomllib.loads(files[f"{CONTAINERD_CERTS_DIR}/{registry}/hosts.toml"])
        url = f"http://172.17.0.1:5000/v2/{registry}"
        assert doc["server"] == url and doc["override_path"] is True
        assert list(doc["host"]) == [url] and doc["host"][url]["override_path"] is True
