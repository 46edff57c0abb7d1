"""The lab's registry tools without Docker: mirror-push.sh sends each image to the path the
mirror layout gives its upstream name (components.config.image_refs, the one place it is said),
lists what the engine lacks, and turns TLS verification off only for a plain-HTTP mirror (an
HTTPS mirror with a private CA is verified against it, --ca); registry.sh refuses to listen
anywhere but loopback or a Docker network's gateway, and with --tls serves HTTPS with the given
certificate; the containerd files ask the mirror and never the upstream registry."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from components.config.image_refs import ImageRef
from components.nodes.registry_mirror import CONTAINERD_CERTS_DIR, Mirror, containerd_files

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


# --- an HTTPS mirror with a private CA ---------------------------------------------------------

CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def seeing_ca(tmp: Path, env: dict[str, str]) -> None:
    """skopeo records each copy and, given --dest-cert-dir, what that directory's ca.crt holds then."""
    _stub(
        Path(env["PATH"].split(":", 1)[0]),
        "skopeo",
        f"""echo "$*" >> {tmp}/copies
while [ $# -gt 0 ]; do
  if [ "$1" = --dest-cert-dir ]; then
    ls "$2" > {tmp}/cert-dir; cat "$2/ca.crt" > {tmp}/ca-seen; echo "$2" > {tmp}/cert-path
  fi
  shift
done
""",
    )


def test_an_https_mirror_with_a_private_ca_is_verified_against_it(tmp_path):
    env = fake_tools(tmp_path, ["busybox:1.36"])
    seeing_ca(tmp_path, env)
    ca = tmp_path / "mirror-ca.pem"
    ca.write_text(CA_PEM)
    proc = push(tmp_path, env, "--ca", str(ca), "https://m.lab:5443", "busybox:1.36")
    assert proc.returncode == 0, proc.stderr
    cert_dir = (tmp_path / "cert-path").read_text().strip()
    assert copies(tmp_path) == [
        f"copy --quiet --dest-cert-dir {cert_dir} docker-daemon:busybox:1.36 "
        "docker://m.lab:5443/docker.io/library/busybox:1.36"
    ]
    assert "--dest-tls-verify" not in copies(tmp_path)[0], "verification stays on"
    assert (tmp_path / "cert-dir").read_text() == "ca.crt\n" and (tmp_path / "ca-seen").read_text() == CA_PEM
    assert not Path(cert_dir).exists(), "the temporary certificate directory is removed"
    assert f"m.lab:5443 over HTTPS, its certificate verified against the CA in {ca}" in proc.stderr


@pytest.mark.parametrize("mirror", ["http://m.lab:5000", "m.lab:5000"])
def test_a_ca_for_a_plain_http_mirror_is_refused(tmp_path, mirror):
    env = fake_tools(tmp_path, ["busybox:1.36"])
    _stub(Path(env["PATH"].split(":", 1)[0]), "curl", "echo 200\n")  # the mirror answers plain HTTP
    ca = tmp_path / "ca.pem"
    ca.write_text(CA_PEM)
    proc = push(tmp_path, env, "--ca", str(ca), mirror, "busybox:1.36")
    assert proc.returncode == 2 and copies(tmp_path) == []
    assert proc.stderr.splitlines() == [
        f"error: --ca {ca}: m.lab:5000 speaks plain HTTP; a CA is for a mirror over HTTPS"
        " (give https://m.lab:5000 if it is one)"
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--ca", "{tmp}/absent.pem"], "error: --ca {tmp}/absent.pem: not a readable file"),
        (["--ca", "{tmp}/key.pem"], "error: --ca {tmp}/key.pem: no PEM certificate in it"),
        (["--ca"], "usage: tools/lab/mirror-push.sh [--ca FILE] MIRROR_HOST[:PORT] IMAGE... (or images on stdin)"),
        (
            ["--insecure"],
            "usage: tools/lab/mirror-push.sh [--ca FILE] MIRROR_HOST[:PORT] IMAGE... (or images on stdin)",
        ),
    ],
)
def test_a_bad_ca_option_is_refused(tmp_path, args, says):
    env = fake_tools(tmp_path, ["busybox:1.36"])
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
    argv = [a.format(tmp=tmp_path) for a in args]
    rest = ["https://m.lab", "busybox:1.36"] if len(argv) > 1 else []
    proc = push(tmp_path, env, *argv, *rest)
    assert proc.returncode == 2 and copies(tmp_path) == []
    assert proc.stderr.splitlines() == [says.format(tmp=tmp_path)]


def fake_registry(tmp: Path, curl_exit: int = 0, curl_says: str = "") -> dict[str, str]:
    """A docker-registry that only runs (its command line as the real one's) and a curl that
    records its arguments and answers with `curl_exit`; loopback addresses need no Docker."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "docker-registry", "while :; do sleep 0.1; done\n")
    _stub(
        bin_dir, "curl", f'echo "$*" >> {tmp}/curl\n[ -z "{curl_says}" ] || echo "{curl_says}" >&2\nexit {curl_exit}\n'
    )
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_TENANCY_CACHE": str(tmp / "cache")}


def registry_sh(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REGISTRY_SH), *args], env=env, capture_output=True, text=True, timeout=30)


def pem_pair(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "registry.crt", tmp / "registry.key"
    cert.write_text(CA_PEM)
    key.write_text("-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n")
    return cert, key


def test_registry_with_tls_serves_https_with_the_given_certificate(tmp_path):
    env = fake_registry(tmp_path)
    cert, key = pem_pair(tmp_path)
    started = registry_sh(env, "start", "--listen", "127.0.0.1:5443", "--tls", str(cert), str(key))
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout == "https://127.0.0.1:5443\n"
        config = yaml.safe_load((tmp_path / "cache/registry/config.yml").read_text())
        assert config["http"]["addr"] == "127.0.0.1:5443"
        assert config["http"]["tls"] == {"certificate": str(cert), "key": str(key)}
        # Its readiness is asked over HTTPS with the certificate as the trust anchor, never unverified.
        asked = (tmp_path / "curl").read_text().splitlines()
        assert asked[-1] == f"-fsS -o /dev/null --max-time 1 --cacert {cert} https://127.0.0.1:5443/v2/"
        assert not any("-k" in a.split() or "--insecure" in a for a in asked)
        status = registry_sh(env, "status")
        assert status.returncode == 0 and status.stdout.startswith("https://127.0.0.1:5443 (pid ")
        again = registry_sh(env, "start", "--listen", "127.0.0.1:5443", "--tls", str(cert), str(key))
        assert (again.returncode, again.stdout) == (0, "https://127.0.0.1:5443\n")
        plain = registry_sh(env, "start", "--listen", "127.0.0.1:5443")
        assert plain.returncode == 1
        assert plain.stderr.startswith("error: the registry already runs at https://127.0.0.1:5443 (pid ")
        assert f"certificate {cert}); stop it first" in plain.stderr
    finally:
        assert registry_sh(env, "stop").returncode == 0


def test_registry_without_tls_writes_no_tls_and_says_http(tmp_path):
    env = fake_registry(tmp_path)
    started = registry_sh(env, "start", "--listen", "127.0.0.1:5000")
    try:
        assert (started.returncode, started.stdout) == (0, "http://127.0.0.1:5000\n"), started.stderr
        config = yaml.safe_load((tmp_path / "cache/registry/config.yml").read_text())
        assert "tls" not in config["http"] and config["http"]["addr"] == "127.0.0.1:5000"
    finally:
        assert registry_sh(env, "stop").returncode == 0


def test_registry_warns_when_its_certificate_does_not_name_its_address(tmp_path):
    says = "curl: (60) SSL: no alternative certificate subject name matches target host name '127.0.0.1'"
    env = fake_registry(tmp_path, curl_exit=60, curl_says=says)
    cert, key = pem_pair(tmp_path)
    started = registry_sh(env, "start", "--listen", "127.0.0.1:5443", "--tls", str(cert), str(key))
    try:
        assert (started.returncode, started.stdout) == (0, "https://127.0.0.1:5443\n")
        assert started.stderr.splitlines() == [
            f"registry: warning: its certificate does not verify for https://127.0.0.1:5443 ({says}); "
            "nodes asking that address will refuse it"
        ]
    finally:
        assert registry_sh(env, "stop").returncode == 0


@pytest.mark.parametrize(
    ("tls", "says"),
    [
        (["{tmp}/absent.crt", "{tmp}/registry.key"], "{tmp}/absent.crt is not a readable file"),
        (["{tmp}/registry.key", "{tmp}/registry.key"], "{tmp}/registry.key holds no PEM certificate"),
        (["{tmp}/registry.crt", "{tmp}/registry.crt"], "{tmp}/registry.crt holds no PEM private key"),
    ],
)
def test_registry_refuses_tls_files_it_cannot_serve_before_writing_anything(tmp_path, tls, says):
    env = fake_registry(tmp_path)
    pem_pair(tmp_path)
    args = [a.format(tmp=tmp_path) for a in tls]
    proc = registry_sh(env, "start", "--listen", "127.0.0.1:5443", "--tls", *args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: --tls {' '.join(args)}: {says.format(tmp=tmp_path)}"]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["start", "--tls", "a.crt"],
        ["start", "--tls", "a.crt", "--listen", "127.0.0.1:5000"],
        ["status", "--tls", "a.crt", "a.key"],
        ["stop", "--tls", "a.crt", "a.key"],
    ],
)
def test_registry_tls_takes_a_certificate_and_a_key_and_only_at_start(tmp_path, args):
    proc = registry_sh(fake_registry(tmp_path), *args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "usage: tools/lab/registry.sh start [--listen ADDR:PORT] [--tls CERT KEY] | stop | status"
    ]
