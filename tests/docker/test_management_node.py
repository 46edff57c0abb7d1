"""The management cluster as the stack makes it (issue 39): one node container from the lab's node
image, `kubeadm init` through the project's own configuration and INIT script
(components.nodes.management_node), every image pulled through the lab's registry mirror, from
images built here (tools/images/build.sh). Then what Kamaji needs of it:
- the node Ready with no control-plane taint, its API server answering the host on the node's address;
- CoreDNS answering a pod's lookup of the API's Service name;
- a PersistentVolumeClaim that names no class bound through the lab's default StorageClass
  (the local-path provisioner, components.nodes.local_path), written by a pod, and its volume and
  directory removed with the claim;
- a NodePort answering from the host on the node's address (what `managementIp` is for);
- a tenant-version kube-apiserver pod running from the mirror (imagePullPolicy Always, as Kamaji
  pulls a tenant's API server).
Measured: start to `Ready`, the node's peak memory while these ran."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from components.config.versions import (
    DEFAULT_TENANT_VERSION,
    KUBEADM_IMAGE_TAGS,
    LAB_BUSYBOX_IMAGE,
    MANAGEMENT_KUBERNETES_VERSION,
    kubeadm_images,
)
from components.nodes import local_path
from tests.support.docker_lab import DockerLab, docker, missing, node_image
from tests.support.events import events
from tests.support.management import (
    MANAGEMENT_MEMORY_MIB,
    Management,
    apply_storage,
    pulled_images,
    start_management,
    untainted,
)
from tests.support.registry import Registry, bridge_gateway, lab_registry, push, requests
from tests.support.tools import CACHE
from tests.support.waits import settles

pytestmark = pytest.mark.docker

# A tenant's kube-apiserver, as Kamaji runs it on this cluster.
TENANT_APISERVER = f"registry.k8s.io/kube-apiserver:{DEFAULT_TENANT_VERSION}"


@pytest.fixture(scope="module")
def mirror(engine, tmp_path_factory) -> Iterator[Registry]:
    images = list(dict.fromkeys([*pulled_images(), TENANT_APISERVER]))
    absent = [i for i in images if not docker("image", "inspect", "--format", "{{.Id}}", i, check=False)]
    if absent:
        missing(f"no {', '.join(absent)} (build them: tools/images/build.sh management)")
    with lab_registry(tmp_path_factory.mktemp("management-registry"), bridge_gateway()) as reg:
        seconds = push(reg, *images)
        print(f"\n[measured] {len(images)} images pushed into the mirror in {seconds:.1f} s")
        yield reg


@pytest.fixture(scope="module")
def management(lab: DockerLab, mirror: Registry, tunables) -> Management:
    m = start_management(lab, node_image(MANAGEMENT_KUBERNETES_VERSION), mirror.endpoint)
    print(
        f"\n[measured] kubeadm init done {m.init_seconds:.1f} s after the container was made; "
        f"Ready at {m.ready_seconds:.1f} s"
    )
    return m


def test_the_node_is_ready_untainted_at_the_pinned_version(management):
    core = management.core()
    node = core.read_node(management.node)
    assert node.status.node_info.kubelet_version == MANAGEMENT_KUBERNETES_VERSION
    assert untainted(core, management.node) == []
    assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [management.address]
    assert node.spec.pod_cidr, "no pod CIDR: the node's pod network has nothing to serve"


def test_every_control_plane_image_came_through_the_mirror(management, mirror):
    for image in kubeadm_images(MANAGEMENT_KUBERNETES_VERSION):
        if "/pause:" in image:
            continue
        ref = image.split("/", 1)[1]
        repo, tag = ref.rsplit(":", 1)
        path = f"/v2/registry.k8s.io/{repo}/manifests/{tag}"
        assert requests(mirror, path), f"no request for {path} in the registry's log"


def _pod(core: Any, name: str, spec: dict[str, Any]) -> None:
    core.create_namespaced_pod(
        "default",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": spec},
    )


def _finished(core: Any, name: str, timeout: float = 180) -> str:
    """The pod's phase once Succeeded or Failed, and its log."""

    def phase() -> str:
        return core.read_namespaced_pod(name, "default").status.phase

    assert settles(lambda: phase() in ("Succeeded", "Failed"), timeout=timeout, interval=1), (
        core.read_namespaced_pod(name, "default").status,
        events(core, name),
    )
    log = core.read_namespaced_pod_log(name, "default")
    assert phase() == "Succeeded", (log, events(core, name))
    return log


def _once(command: str, image: str = LAB_BUSYBOX_IMAGE, **extra: Any) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", command]}
        ],
        **extra,
    }


def test_coredns_answers_a_pod(management):
    """Once kubeadm's CoreDNS is available (its first seconds may answer before the kubernetes
    plugin has synced), a pod's lookup of the API's Service name gives the Service's address."""
    from kubernetes import client

    apps = client.AppsV1Api(management.client())
    start = time.monotonic()

    def available() -> bool:
        return (apps.read_namespaced_deployment("coredns", "kube-system").status.available_replicas or 0) >= 1

    assert settles(available, timeout=180, interval=1), _namespace_events(management.core(), "kube-system")
    core = management.core()
    _pod(
        core,
        "dns",
        _once(
            "for i in 1 2 3 4 5 6 7 8 9 10; do nslookup -type=a kubernetes.default.svc.cluster.local && exit 0; "
            "sleep 2; done; exit 1"
        ),
    )
    log = _finished(core, "dns")
    api = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    assert f"Address: {api}" in log, log
    print(f"\n[measured] CoreDNS available {time.monotonic() - start:.1f} s after Ready; lookup -> {api}")


@pytest.fixture(scope="module")
def storage(management) -> None:
    apply_storage(management)
    from kubernetes import client

    apps = client.AppsV1Api(management.client())

    def available() -> bool:
        d = apps.read_namespaced_deployment("local-path-provisioner", local_path.NAMESPACE)
        return (d.status.available_replicas or 0) >= 1

    assert settles(available, timeout=180, interval=1), _namespace_events(management.core(), local_path.NAMESPACE)


def _namespace_events(core: Any, namespace: str) -> list[tuple[str, str, str]]:
    items = core.list_namespaced_event(namespace).items
    return [(e.involved_object.name, e.reason, e.message) for e in items]


def test_a_claim_binds_through_the_default_class_and_goes_with_its_volume(management, storage, lab):
    core = management.core()
    start = time.monotonic()
    core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    spec = _once(
        "echo kept > /data/file && cat /data/file",
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    )
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    _pod(core, "writer", spec)
    assert _finished(core, "writer").strip() == "kept"
    claim = core.read_namespaced_persistent_volume_claim("data", "default")
    assert claim.status.phase == "Bound"
    assert claim.spec.storage_class_name == local_path.STORAGE_CLASS
    volume = core.read_persistent_volume(claim.spec.volume_name)
    path = volume.spec.host_path.path if volume.spec.host_path else volume.spec.local.path
    assert path.startswith(local_path.VOLUMES_PATH + "/"), path
    assert lab.exec(management.node, "cat", f"{path}/file") == "kept"
    print(f"\n[measured] claim bound and written {time.monotonic() - start:.1f} s after creation at {path}")

    core.delete_namespaced_pod("writer", "default")
    assert settles(lambda: not core.list_namespaced_pod("default", label_selector="app=writer").items, timeout=60)
    core.delete_namespaced_persistent_volume_claim("data", "default")

    def gone() -> bool:
        return not [v for v in core.list_persistent_volume().items if v.metadata.name == volume.metadata.name]

    assert settles(gone, timeout=120, interval=1), _namespace_events(core, local_path.NAMESPACE)
    assert settles(lambda: not _exists(management.node, path), timeout=60), f"{path} left on the node"


def _exists(node: str, path: str) -> bool:
    return docker("exec", node, "sh", "-c", f"test -e {path} && echo yes || echo no") == "yes"


def test_a_nodeport_answers_the_host_on_the_node_s_address(management):
    core = management.core()
    _pod(
        core,
        "web",
        {
            "containers": [
                {
                    "name": "main",
                    "image": LAB_BUSYBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "sh",
                        "-c",
                        "mkdir -p /www && echo served > /www/index.html && httpd -f -p 8080 -h /www",
                    ],
                    "ports": [{"containerPort": 8080}],
                }
            ]
        },
    )
    service = core.create_namespaced_service(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    port = service.spec.ports[0].node_port
    url = f"http://{management.address}:{port}/"
    body: list[str] = []

    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                body[:] = [r.read().decode()]
            return True
        except OSError:
            return False

    assert settles(answers, timeout=120, interval=1), (core.read_namespaced_pod("web", "default").status, url)
    assert body == ["served\n"], body
    print(f"\n[measured] {url} answered the host: {body[0].strip()!r}")


def test_a_tenant_version_kube_apiserver_runs_from_the_mirror(management, mirror):
    core = management.core()
    image = TENANT_APISERVER
    spec = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": image, "imagePullPolicy": "Always", "command": ["kube-apiserver", "--version"]}
        ],
    }
    _pod(core, "tenant-apiserver", spec)
    assert _finished(core, "tenant-apiserver") == f"Kubernetes {DEFAULT_TENANT_VERSION}\n"
    pulls = requests(mirror, f"/v2/registry.k8s.io/kube-apiserver/manifests/{DEFAULT_TENANT_VERSION}")
    assert len(pulls) >= 2, pulls  # kubeadm's pull, then the pod's own (Always)


def test_memory(management, lab):
    mib = lab.memory_mib(management.node)
    print(f"\n[measured] the management node uses {mib:.0f} MiB (cap {MANAGEMENT_MEMORY_MIB})")
    assert mib < MANAGEMENT_MEMORY_MIB


@pytest.mark.parametrize("version", list(KUBEADM_IMAGE_TAGS))
def test_the_image_table_is_what_kubeadm_lists(version):
    """versions.KUBEADM_IMAGE_TAGS (the image list's and the tier's source) against the kubeadm the
    node image carries (tools/images/build.sh node builds it into the tools cache)."""
    kubeadm = CACHE / "kube" / version / "kubeadm"
    if not kubeadm.exists():
        missing(f"no {kubeadm} (build it: tools/images/build.sh node --kubernetes {version})")
    listed = subprocess.run(
        [str(kubeadm), "config", "images", "list", "--kubernetes-version", version],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(listed) == sorted(kubeadm_images(version))
