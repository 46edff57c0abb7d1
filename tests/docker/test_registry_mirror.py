"""A closed network's pulls: a node from the lab's node image, started with the mirror's
containerd files, pulls an image by its upstream name from the lab's registry (tools/lab/registry.sh,
filled by tools/lab/mirror-push.sh), and with the registry stopped a pull fails naming the mirror.

Then the mirror over HTTPS with a CA the stack is given (issue 38): a CA and a server certificate
for the registry's address made here, the registry started with --tls, filled by mirror-push.sh
--ca (verification on); a node started with the files for `Mirror("https://...", ca_pem)` pulls
through it, and the same node with those files rewritten without the CA (containerd reads certs.d
at every pull) fails the pull naming the mirror and the certificate it does not trust.

The lab's own control-plane images (issue 39): registry.k8s.io/kube-apiserver at the default
tenant version, built by tools/images/build.sh control-plane and pushed under that upstream name,
runs `kube-apiserver --version` as a pod on the mirror's node, pulled through the mirror.

Each registry listens on the Docker bridge network's gateway on a port of its own, with its cache
in the test's temporary directory (a registry of the user's is left alone); the nodes sit on the
lab's network and reach it through the host. Nothing here is asked of any other address."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from components.config.image_refs import STANDARD_REGISTRIES, ImageRef
from components.config.versions import DEFAULT_TENANT_VERSION
from components.nodes.registry_mirror import CA_FILE, CONTAINERD_CERTS_DIR, Mirror, containerd_files
from tests.support.cluster import self_signed, signed_by
from tests.support.docker_lab import BUSYBOX, control_plane_image, docker, missing
from tests.support.events import events
from tests.support.lab_join import join_worker, node_ready
from tests.support.registry import MIRROR_PUSH, Registry, bridge_gateway, lab_registry, requests
from tests.support.waits import settles

pytestmark = pytest.mark.docker

# The upstream name the pods ask for; pushed into the mirror from the lab's own busybox.
UPSTREAM = "docker.io/library/busybox:1.36"
# An upstream name the mirror never had.
ABSENT = "docker.io/library/busybox:1.37"
# The HTTPS mirror's upstream name: a tag of its own, so its requests are told from the above.
TLS_UPSTREAM = "docker.io/library/busybox:1.36.1"


@pytest.fixture(scope="module")
def registry(engine, tmp_path_factory) -> Iterator[Registry]:
    gateway = bridge_gateway()
    with lab_registry(tmp_path_factory.mktemp("registry-cache"), gateway) as reg:
        yield reg


@contextmanager
def _in_mirror(registry: Registry, upstream: str, *push_args: str) -> Iterator[str]:
    """`upstream` in the mirror: the lab's busybox tagged under that name locally (unless the
    engine already has an image of that name, which is then pushed as it is), then mirror-push.sh
    with `push_args` (the mirror and its options); yields what mirror-push.sh said."""
    if not docker("image", "inspect", "--format", "{{.Id}}", BUSYBOX, check=False):
        missing(f"no {BUSYBOX} (build it: tools/images/build.sh busybox)")
    tagged = not docker("image", "inspect", "--format", "{{.Id}}", upstream, check=False)
    if tagged:
        docker("tag", BUSYBOX, upstream)
    try:
        start = time.monotonic()
        proc = subprocess.run(
            ["bash", str(MIRROR_PUSH), *push_args, upstream], capture_output=True, text=True, timeout=300
        )
        print(f"\n[measured] mirror-push.sh {time.monotonic() - start:.1f} s: {proc.stderr.strip()}")
        assert proc.returncode == 0, proc.stderr
        assert f"{upstream} -> {ImageRef.parse(upstream).in_mirror(registry.host)}" in proc.stderr
        yield proc.stderr
    finally:
        if tagged:
            docker("image", "rm", upstream, check=False)


@pytest.fixture(scope="module")
def mirrored(registry) -> Iterator[str]:
    with _in_mirror(registry, UPSTREAM, registry.host) as said:
        assert "plain HTTP" in said
        yield UPSTREAM


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


@pytest.fixture(scope="module")
def apiserver_mirrored(registry) -> Iterator[str]:
    """The lab's kube-apiserver image at the default tenant version, in the mirror as itself."""
    image = control_plane_image("kube-apiserver", DEFAULT_TENANT_VERSION)
    with _in_mirror(registry, image, registry.host):
        yield image


def _pod(core, name: str, node: str, image: str, command: tuple[str, ...] = ("sleep", "3600")) -> None:
    """A pod on `node` running `image`, pulled at every start (imagePullPolicy Always)."""
    core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": image, "imagePullPolicy": "Always", "command": list(command)}],
            },
        },
    )


def _pull_failed(core, pod: str) -> list[str]:
    """The messages of the pod's `Failed` events that say a pull failed."""
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={pod}").items
    return [e.message for e in events if e.reason == "Failed" and "Failed to pull image" in (e.message or "")]


def _first_pull_failure(core, pod: str) -> str:
    """The first `Failed` pull event of the pod, waited for up to 120 s."""
    found: list[str] = []

    def failed() -> bool:
        found[:] = _pull_failed(core, pod)
        return bool(found)

    assert settles(failed, timeout=120, interval=0.5), events(core, pod)
    return found[0]


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
    access = requests(registry, wanted)
    assert access, f"the registry's log has no request for {wanted}:\n{registry.log.read_text()[-3000:]}"
    print(f"\n[measured] pod Running {seconds:.1f} s after creation; registry log: {access[0]}")


def _container_log(lab, node: str, pod) -> tuple[set[str], str]:
    """The first run of the pod's container `main` as the kubelet logged it on `node` (CRI format,
    `<time> <stream> <F|P> <text>` a line, P a partial line): its streams and its text. Read on the
    node: the test control plane's API server has no kubelet client certificate, so pods/log
    through it is refused (401) by the kubelet."""
    meta = pod.metadata
    raw = lab.exec(node, "cat", f"/var/log/pods/{meta.namespace}_{meta.name}_{meta.uid}/main/0.log")
    streams: set[str] = set()
    text = ""
    for line in raw.splitlines():
        _, stream, tag, *rest = line.split(" ", 3)
        streams.add(stream)
        text += (rest[0] if rest else "") + ("\n" if tag == "F" else "")
    return streams, text


def test_the_lab_s_kube_apiserver_image_runs_from_the_mirror(control_plane, lab, node, registry, apiserver_mirrored):
    """Before the test that stops the registry (the tests of this module run in file order)."""
    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "kube-apiserver-version", node, apiserver_mirrored, ("kube-apiserver", "--version"))

    def phase() -> str:
        return core.read_namespaced_pod("kube-apiserver-version", "default").status.phase

    assert settles(lambda: phase() in ("Succeeded", "Failed"), timeout=180, interval=0.5), (
        core.read_namespaced_pod("kube-apiserver-version", "default").status,
        events(core, "kube-apiserver-version"),
    )
    seconds = time.monotonic() - start
    assert phase() == "Succeeded", (
        core.read_namespaced_pod("kube-apiserver-version", "default").status,
        events(core, "kube-apiserver-version"),
    )
    streams, log = _container_log(lab, node, core.read_namespaced_pod("kube-apiserver-version", "default"))
    assert (streams, log) == ({"stdout"}, f"Kubernetes {DEFAULT_TENANT_VERSION}\n"), (streams, log)
    wanted = f"/v2/registry.k8s.io/kube-apiserver/manifests/{DEFAULT_TENANT_VERSION}"
    access = requests(registry, wanted)
    assert access, f"the registry's log has no request for {wanted}:\n{registry.log.read_text()[-3000:]}"
    print(f"\n[measured] pod Succeeded {seconds:.1f} s after creation; log: {log.strip()!r}; registry log: {access[0]}")


def test_with_the_mirror_stopped_a_pull_fails_naming_the_mirror(control_plane, node, registry, mirrored):
    stopped = registry.script("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert registry.script("status").returncode == 3
    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "mirror-down", node, ABSENT)
    event = _first_pull_failure(core, "mirror-down")
    print(f"\n[measured] pull failed {time.monotonic() - start:.1f} s after creation; event: {event}")
    assert registry.host in event, event

    def waiting() -> str:
        statuses = core.read_namespaced_pod("mirror-down", "default").status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        return state.reason if state else ""

    assert settles(lambda: waiting() in ("ErrImagePull", "ImagePullBackOff"), timeout=60), waiting()


# --- the mirror over HTTPS, with a CA the stack is given --------------------------------------


def _ca_and_server_certificate(directory: Path, address: str) -> tuple[str, Path, Path]:
    """A CA of the test's own and a server certificate it signs for `address` (an IP address in
    the subjectAltName, as Go's verification wants): the CA's PEM, the certificate's and key's files."""
    ca, _ = self_signed(directory, "ca", "/CN=gpu-tenancy test mirror CA")
    cert, key = signed_by(directory, "ca", "registry", f"/CN={address}", f"subjectAltName=IP:{address}")
    return ca.read_text(), cert, key


@pytest.fixture(scope="module")
def tls_registry(engine, tmp_path_factory) -> Iterator[Registry]:
    gateway = bridge_gateway()
    pki = tmp_path_factory.mktemp("registry-pki")
    ca_pem, cert, key = _ca_and_server_certificate(pki, gateway)
    with lab_registry(tmp_path_factory.mktemp("registry-tls-cache"), gateway, "--tls", str(cert), str(key)) as reg:
        reg.ca = pki / "ca.crt"
        reg.ca.write_text(ca_pem)
        yield reg


@pytest.fixture(scope="module")
def tls_mirrored(tls_registry) -> Iterator[str]:
    assert tls_registry.ca is not None
    with _in_mirror(tls_registry, TLS_UPSTREAM, "--ca", str(tls_registry.ca), tls_registry.endpoint) as said:
        assert f"over HTTPS, its certificate verified against the CA in {tls_registry.ca}" in said
        yield TLS_UPSTREAM


@pytest.fixture(scope="module")
def tls_files(tls_registry) -> dict[str, str]:
    assert tls_registry.ca is not None
    return containerd_files(Mirror(tls_registry.endpoint, tls_registry.ca.read_text()), STANDARD_REGISTRIES)


@pytest.fixture(scope="module")
def tls_node(control_plane, lab, image, tls_files) -> str:
    name = lab.start_node("mirror-tls", image, files=tls_files)
    join_worker(control_plane, lab, name)
    core = control_plane.core()
    assert settles(lambda: node_ready(core, name), timeout=120, interval=1), f"{name} not Ready"
    return name


def test_the_https_node_starts_with_the_ca_beside_each_hosts_toml(tls_node, lab, tls_files):
    assert set(tls_files) == {
        f"{CONTAINERD_CERTS_DIR}/{r}/{f}" for r in STANDARD_REGISTRIES for f in ("hosts.toml", CA_FILE)
    }
    for path, content in tls_files.items():
        assert lab.exec(tls_node, "cat", path) + "\n" == content
    for r in STANDARD_REGISTRIES:
        assert f'ca = "{CONTAINERD_CERTS_DIR}/{r}/{CA_FILE}"' in tls_files[f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml"]


def test_over_https_a_pod_runs_from_the_mirror_trusting_the_ca_it_was_given(
    control_plane, tls_node, tls_registry, tls_mirrored
):
    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "from-tls-mirror", tls_node, tls_mirrored)

    def running() -> bool:
        return core.read_namespaced_pod("from-tls-mirror", "default").status.phase == "Running"

    assert settles(running, timeout=120, interval=0.5), (
        core.read_namespaced_pod("from-tls-mirror", "default").status,
        events(core, "from-tls-mirror"),
    )
    seconds = time.monotonic() - start
    wanted = "/v2/docker.io/library/busybox/manifests/1.36.1"
    access = requests(tls_registry, wanted)
    assert access, f"the registry's log has no request for {wanted}:\n{tls_registry.log.read_text()[-3000:]}"
    print(f"\n[measured] pod Running {seconds:.1f} s after creation (https); registry log: {access[0]}")


def test_without_the_ca_a_pull_fails_naming_the_mirror_and_its_untrusted_certificate(
    control_plane, lab, tls_node, tls_registry, tls_mirrored
):
    """The same node, its files rewritten as for a mirror given without its CA: no `ca =` in any
    hosts.toml, no CA file. containerd reads certs.d at every pull, so no restart; the image is in
    the mirror, so the certificate is the only thing between the node and it."""
    without_ca = containerd_files(Mirror(tls_registry.endpoint), STANDARD_REGISTRIES)
    assert set(without_ca) == {f"{CONTAINERD_CERTS_DIR}/{r}/hosts.toml" for r in STANDARD_REGISTRIES}
    for path, content in without_ca.items():
        assert "ca = " not in content
        lab.exec(tls_node, "sh", "-c", f"cat > {path}", input=content)
        assert lab.exec(tls_node, "cat", path) + "\n" == content
    lab.exec(tls_node, "rm", *(f"{CONTAINERD_CERTS_DIR}/{r}/{CA_FILE}" for r in STANDARD_REGISTRIES))
    handshakes_before = tls_registry.log.read_text().count("TLS handshake error")

    core = control_plane.core()
    start = time.monotonic()
    _pod(core, "tls-untrusted", tls_node, tls_mirrored)
    event = _first_pull_failure(core, "tls-untrusted")
    print(f"\n[measured] pull failed {time.monotonic() - start:.1f} s after creation (https, no CA); event: {event}")
    assert f"https://{tls_registry.host}/v2/docker.io/library/busybox/manifests/1.36.1" in event, event
    assert "x509: certificate signed by unknown authority" in event, event
    # The node reached the mirror and refused its certificate (the registry's side of it).
    handshakes = [line for line in tls_registry.log.read_text().splitlines() if "TLS handshake error" in line][
        handshakes_before:
    ]
    print(f"[measured] registry log: {handshakes[0] if handshakes else '(no TLS handshake error)'}")
    assert any("bad certificate" in line for line in handshakes), tls_registry.log.read_text()[-3000:]
