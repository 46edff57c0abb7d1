"""A tenant upgrade as a plan, in the program's resource graph under mocks: the control plane
first (waited until Kamaji runs the new version), then the docker workers one at a time (each
drained before its container is replaced, settled once its successor's fake cards are back, and
only then the next one drained), then HAMi's kube-scheduler at the tenant's version; Pod
workloads are made again after HAMi."""

import copy
import json

import pytest

from components.config import versions
from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.tenant.control_plane import ready_at
from tests.support.harness import ROOT, deps, load_config_file, reaches, run_program

DEV = load_config_file(ROOT / "Pulumi.dev.yaml")
WORKERS = 3


def _config(version: str, b_version: str | None = None) -> dict:
    config = copy.deepcopy(DEV)
    for t in config["gpu-tenancy:tenants"]:
        t["kubernetesVersion"] = b_version if b_version and t["name"] == "team-b" else version
        if t["name"] == "team-a":
            t["pools"] = [{"name": "worker", "mode": "docker", "nodes": WORKERS}]
    return config


@pytest.fixture(scope="module")
def rec():
    return run_program(_config("v1.36.1"))


def test_two_minors_are_pinned_each_with_its_worker_image():
    minors = {v.rsplit(".", 1)[0] for v in versions.KIND_NODE_IMAGES}
    assert {"v1.35", "v1.36"} <= minors
    for version, image in versions.KIND_NODE_IMAGES.items():
        assert image.startswith(f"docker.io/kindest/node:{version}")


def test_the_control_plane_is_waited_until_it_runs_the_new_version(rec):
    tcp = rec.named("team-a-cp-tcp").inputs
    assert tcp["spec"]["kubernetes"]["version"] == "v1.36.1"
    wait = json.loads(tcp["metadata"]["annotations"]["pulumi.com/waitFor"])
    assert wait == ready_at("v1.36.1")
    assert "jsonpath={.status.kubernetesResources.version.version}=v1.36.1" in wait
    assert "team-a-cp-version" in deps(rec, "team-a-cp-tcp")  # the version gate refuses bad steps first


def test_the_first_worker_is_drained_only_after_the_control_plane(rec):
    assert "team-a-cp-tcp" in deps(rec, "team-a-worker-0-drain")


@pytest.mark.parametrize("i", range(WORKERS))
def test_each_worker_is_drained_before_its_container_is_replaced(rec, i):
    w = f"team-a-worker-{i}"
    container = rec.named(f"{w}-container")
    assert container.delete_before_replace
    assert f"{w}-drain" in deps(rec, f"{w}-container")
    assert rec.named(f"{w}-drain").inputs["image"] == versions.KIND_NODE_IMAGES["v1.36.1"]
    assert rec.named(f"{w}-image").inputs["name"] == versions.KIND_NODE_IMAGES["v1.36.1"]


@pytest.mark.parametrize("i", range(WORKERS))
def test_each_worker_settles_after_its_successor_joined_and_got_its_cards(rec, i):
    w = f"team-a-worker-{i}"
    patch = f"team-a-gpus-gpu-lab-team-a-worker-{i}"
    settled = rec.named(f"{w}-settled")
    assert {f"{w}-membership", f"{w}-labels", f"{patch}-capacity"} <= deps(rec, f"{w}-settled")
    # it takes what the drain handed over and the machine that joined (a new one: a replacement)
    by_input = {k: {rec.by_urn(u).name for u in urns} for k, urns in settled.property_dependencies.items()}
    assert f"{w}-drain" in by_input["moved"] and f"{w}-join" in by_input["machine_id"]
    # the labels and the fake cards are written again for a new machine under the same node name
    for node_patch in (patch, f"{w}-labels"):
        assert f"{w}-join" in {rec.by_urn(u).name for u in rec.named(node_patch).property_dependencies["metadata"]}
    assert "machine_id" in rec.named(f"{patch}-capacity").property_dependencies


@pytest.mark.parametrize("i", range(1, WORKERS))
def test_workers_go_one_at_a_time(rec, i):
    """Worker i is drained only after worker i-1 settled, so at most one is out at a time."""
    assert f"team-a-worker-{i - 1}-settled" in deps(rec, f"team-a-worker-{i}-drain")
    assert reaches(rec, f"team-a-worker-{i}-container", f"team-a-worker-{i - 1}-settled")
    order = [r.name for r in rec.registrations]
    assert order.index(f"team-a-worker-{i - 1}-settled") < order.index(f"team-a-worker-{i}-drain")


def test_hami_follows_the_last_worker_at_the_tenant_version(rec):
    release = rec.named("team-a-hami-release")
    assert f"team-a-worker-{WORKERS - 1}-settled" in deps(rec, "team-a-hami-release")
    image = release.inputs["values"]["scheduler"]["kubeScheduler"]["image"]
    assert image["tag"] == "v1.36.1"
    for i in range(WORKERS):
        assert reaches(rec, "team-a-hami-release", f"team-a-worker-{i}-settled")


def test_workloads_come_after_hami_and_a_pod_is_made_again_on_a_new_version(rec):
    pod = rec.named("team-b-inference-inference-l4-pod")
    assert pod.replacement_trigger == "v1.36.1"
    # One name, so the old one goes first: a trigger replaces create-first, and the original's
    # delete, by that name, came last and took the new pod with it (seen on the lab's upgrade).
    assert pod.delete_before_replace is True
    assert reaches(rec, "team-b-inference-inference-l4-pod", "team-b-hami-release")
    deployment = rec.named("team-a-default-shared-a100-deployment")
    assert deployment.replacement_trigger is None  # its ReplicaSet brings its pods back
    assert reaches(rec, "team-a-default-shared-a100-deployment", "team-a-hami-release")


def test_an_upgrade_changes_what_the_plan_says_and_nothing_of_another_tenant():
    """Between team-a at v1.35.1 and at v1.36.1 only team-a's version-bound inputs differ."""
    before, after = run_program(_config("v1.35.1")), run_program(_config("v1.36.1", b_version="v1.35.1"))
    was = {r.urn: r.inputs for r in before.registrations}
    changed = {r.name for r in after.registrations if r.inputs != was[r.urn]}
    expected = {"team-a-cp-tcp", "team-a-cp-version", "team-a-cp-settled", "team-a-hami-release"}
    expected |= {"team-a-kube-proxy-daemonset"}  # the stack's kube-proxy follows the tenant's version
    expected |= {f"team-a-worker-{i}-{part}" for i in range(WORKERS) for part in ("image", "drain")}
    assert changed == expected


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("v1.37.0", "greater than the supported one"),
        ("v1.36.0", "no worker image is pinned"),
        ("v1.34.2", "no worker image is pinned"),
    ],
)
def test_a_version_without_a_worker_image_or_above_kamaji_is_refused_naming_the_key(version, says):
    config = {
        "tenants": [
            {
                "name": "team-a",
                "kubernetesVersion": version,
                "gpu": {"model": "L4", "cardsPerNode": 1},
                "quota": {"gpus": 1, "gpumemMb": 1, "gpucoresPercent": 1},
            }
        ]
    }
    with pytest.raises(ConfigError) as err:
        load_stack_config("gpu-tenancy", config)
    assert "tenants[0].kubernetesVersion" in str(err.value) and says in str(err.value)
