"""The management cluster as `pulumi up` makes it (ManagementCluster, distribution kubeadm: the
dev stack's default), through the real engine and the docker and command providers: its node
container from the lab's node image, `kubeadm init` through the project's configuration, every
image through the lab's registry mirror, the local-path objects applied by the engine. Then day
one and two as a platform engineer sees them:
- the cluster serves what Kamaji needs (Node Ready and untainted, CoreDNS, a claim bound through
  the default StorageClass);
- the admin kubeconfig is a secret in the state, never in plain text;
- a second `up` changes nothing;
- `destroy` leaves no container, network or volume of the stack's."""

from __future__ import annotations

import ipaddress
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.versions import LAB_BUSYBOX_IMAGE, MANAGEMENT_KUBERNETES_VERSION
from components.kube.client import api_client
from components.nodes import local_path
from tests.support.docker_lab import TunablesGuard, docker, ensure_engine, missing, node_image, read_tunables
from tests.support.management import pulled_images, untainted
from tests.support.plugins import provider_plugins
from tests.support.registry import bridge_gateway, lab_registry, push
from tests.support.tools import PulumiCli, require, tools_env
from tests.support.waits import settles

pytestmark = pytest.mark.lab

PROGRAM = Path(__file__).parent / "programs" / "management"


@dataclass
class Up:
    cli: PulumiCli
    work: Path
    name: str
    kubeconfig: str
    seconds: float
    destroyed: bool = False

    def client(self) -> Any:
        return api_client(self.kubeconfig)


def free_subnet() -> ipaddress.IPv4Network:
    """A /24 no Docker network uses: Docker's own pick for a network made and removed at once."""
    probe = f"gt-probe-{uuid.uuid4().hex[:6]}"
    docker("network", "create", probe)
    try:
        subnet = docker("network", "inspect", probe, "--format", "{{(index .IPAM.Config 0).Subnet}}")
    finally:
        docker("network", "rm", probe, check=False)
    return ipaddress.IPv4Network(subnet)


def leftovers(name: str) -> list[tuple[str, str]]:
    """The stack's Docker objects still present (kind, name), by the names it gives them."""
    found = []
    for kind, wanted, listing in (
        ("container", f"{name}-management", ("container", "ls", "--all", "--format", "{{.Names}}")),
        ("network", name, ("network", "ls", "--format", "{{.Name}}")),
    ):
        if wanted in docker(*listing).splitlines():
            found.append((kind, wanted))
    return found


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> Iterator[Up]:
    env = provider_plugins(tools_env(), tmp_path_factory.mktemp("plugins"))
    require(env, "pulumi", skip=missing)
    ensure_engine()
    node_image(MANAGEMENT_KUBERNETES_VERSION)
    images = pulled_images()
    absent = [i for i in images if not docker("image", "inspect", "--format", "{{.Id}}", i, check=False)]
    if absent:
        missing(f"no {', '.join(absent)} (build them: tools/images/build.sh management)")
    before = read_tunables()
    guard = TunablesGuard()
    name = f"gt-{uuid.uuid4().hex[:6]}"
    cli = PulumiCli(env, tmp_path_factory.mktemp("state"))
    work = tmp_path_factory.mktemp("management")
    up = Up(cli, work, name, "", 0.0)
    try:
        with lab_registry(tmp_path_factory.mktemp("registry"), bridge_gateway()) as reg:
            push(reg, *images)
            cli.new_stack(PROGRAM, work, None, stack="lab")  # the management cluster is the stack's own
            subnet = free_subnet()
            cluster = {"mode": "docker", "name": name, "subnet": str(subnet), "managementIp": str(subnet[2])}
            _set_objects(work, {"cluster": cluster, "mirror": {"endpoint": reg.endpoint}})
            start = time.monotonic()
            result = cli("up", "--yes", "--skip-preview", cwd=work, check=False, timeout=1200)
            up.seconds = time.monotonic() - start
            assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
            print(f"\n[measured] pulumi up of the management cluster: {up.seconds:.0f} s")
            up.kubeconfig = json.loads(cli("stack", "output", "--json", "--show-secrets", cwd=work).stdout)[
                "kubeconfig"
            ]
            yield up
    finally:
        if not up.destroyed:
            cli("destroy", "--yes", cwd=work, check=False, timeout=600)
        for kind, obj in leftovers(name):  # what a failed destroy left, by the names the stack gives
            docker(kind, "rm", *([] if kind == "network" else ["--force"]), obj, check=False)
        guard.stop()
        assert read_tunables() == before, f"kernel tunables not put back: {guard.lines}"


def _set_objects(work: Path, objects: dict[str, object]) -> None:
    """The stack file's config objects, written as a user writes Pulumi.<stack>.yaml (beside the
    salt `stack init` wrote)."""
    path = work / "Pulumi.lab.yaml"
    doc = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    doc.setdefault("config", {}).update({f"management:{k}": v for k, v in objects.items()})
    path.write_text(yaml.safe_dump(doc))


def test_up_makes_a_cluster_with_what_kamaji_needs(up):
    from kubernetes import client

    api = up.client()
    core, apps, storage = client.CoreV1Api(api), client.AppsV1Api(api), client.StorageV1Api(api)
    (node,) = core.list_node().items
    assert node.metadata.name == f"{up.name}-management"
    assert node.status.node_info.kubelet_version == MANAGEMENT_KUBERNETES_VERSION
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert untainted(core, node.metadata.name) == []
    default = [
        s.metadata.name
        for s in storage.list_storage_class().items
        if (s.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert default == [local_path.STORAGE_CLASS], default

    def available(name: str, namespace: str) -> bool:
        return (apps.read_namespaced_deployment(name, namespace).status.available_replicas or 0) >= 1

    assert settles(lambda: available("coredns", "kube-system"), timeout=180, interval=2)
    assert settles(lambda: available("local-path-provisioner", local_path.NAMESPACE), timeout=180, interval=2)
    claim = client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="probe"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"], resources=client.V1VolumeResourceRequirements(requests={"storage": "16Mi"})
        ),
    )
    core.create_namespaced_persistent_volume_claim("default", claim)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="probe"),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[
                client.V1Container(
                    name="probe",
                    image=LAB_BUSYBOX_IMAGE,
                    image_pull_policy="IfNotPresent",
                    command=["sh", "-c", "nslookup kubernetes.default.svc.cluster.local && echo ok > /data/ok"],
                    volume_mounts=[client.V1VolumeMount(name="data", mount_path="/data")],
                )
            ],
            volumes=[
                client.V1Volume(
                    name="data", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name="probe")
                )
            ],
        ),
    )
    core.create_namespaced_pod("default", pod)
    assert settles(
        lambda: core.read_namespaced_pod("probe", "default").status.phase in ("Succeeded", "Failed"),
        timeout=240,
        interval=2,
    )
    phase = core.read_namespaced_pod("probe", "default").status.phase
    assert phase == "Succeeded", core.read_namespaced_pod_log("probe", "default")
    assert core.read_namespaced_persistent_volume_claim("probe", "default").status.phase == "Bound"
    core.delete_namespaced_pod("probe", "default", grace_period_seconds=0)
    core.delete_namespaced_persistent_volume_claim("probe", "default")
    assert settles(lambda: not core.list_persistent_volume().items, timeout=120, interval=2)


def test_the_admin_kubeconfig_is_a_secret_in_the_state(up):
    user = yaml.safe_load(up.kubeconfig)["users"][0]["user"]
    key = user["client-key-data"]
    state = up.cli("stack", "export", cwd=up.work).stdout
    assert key not in state
    plain = up.cli("stack", "output", "kubeconfig", cwd=up.work).stdout
    assert key not in plain and "secret" in plain.lower(), plain


def test_a_second_up_changes_nothing(up):
    start = time.monotonic()
    result = up.cli("up", "--yes", "--expect-no-changes", cwd=up.work, check=False, timeout=600)
    print(f"\n[measured] second pulumi up: {time.monotonic() - start:.0f} s")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    preview = up.cli("preview", "--diff", "--expect-no-changes", cwd=up.work, check=False)
    assert preview.returncode == 0, preview.stdout[-4000:]


def test_destroy_leaves_no_container_network_or_volume(up):
    assert len(leftovers(up.name)) == 2, leftovers(up.name)
    # The node's /var: an anonymous volume of its own, which goes with the container.
    mounts = json.loads(docker("inspect", "--format", "{{json .Mounts}}", f"{up.name}-management"))
    (var,) = [m for m in mounts if m["Destination"] == "/var"]
    assert var["Type"] == "volume" and re.fullmatch("[0-9a-f]{64}", var["Name"]), var
    start = time.monotonic()
    result = up.cli("destroy", "--yes", cwd=up.work, check=False, timeout=600)
    print(f"\n[measured] pulumi destroy: {time.monotonic() - start:.0f} s")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    up.destroyed = True
    assert leftovers(up.name) == []
    assert var["Name"] not in docker("volume", "ls", "--format", "{{.Name}}").splitlines()
