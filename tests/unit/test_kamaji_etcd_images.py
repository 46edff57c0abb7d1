"""kamaji-etcd's images pinned: Kamaji's chart values name each of them by an exact tag (the chart
alone would pick cfssl `latest`, pulled on every job, and a kubectl tag from the cluster it meets),
and the image list names the same references, exact."""

from __future__ import annotations

import pytest

from components.config import image_set, versions
from components.config.image_refs import ImageRef
from components.config.load import load_stack_file
from components.platform.kamaji import kamaji_values
from tests.support.harness import ROOT


def _ref(values: dict, key: str = "image") -> str:
    return f"{values[key]}:{values['tag']}"


def test_the_kamaji_etcd_values_carry_every_pinned_reference():
    etcd = kamaji_values()["kamaji-etcd"]
    jobs = etcd["jobs"]
    assert _ref(etcd["image"], "repository") == versions.KAMAJI_ETCD_IMAGE
    assert _ref(jobs["etcd"]) == versions.KAMAJI_ETCD_CLIENT_IMAGE
    assert _ref(jobs["kubectl"]) == versions.KAMAJI_ETCD_KUBECTL_IMAGE
    assert _ref(jobs["cfssl"]) == versions.KAMAJI_ETCD_CFSSL_IMAGE
    assert sorted([_ref(etcd["image"], "repository"), *(_ref(j) for j in jobs.values())]) == sorted(
        versions.KAMAJI_ETCD_IMAGES
    )


def test_the_images_with_a_pull_policy_key_are_pulled_only_when_absent():
    etcd = kamaji_values()["kamaji-etcd"]
    assert etcd["image"]["pullPolicy"] == "IfNotPresent"
    assert etcd["jobs"]["etcd"]["pullPolicy"] == "IfNotPresent"
    # The chart has no such key for cfssl and kubectl: Kubernetes pulls `latest` (or no tag) always.
    assert "pullPolicy" not in etcd["jobs"]["cfssl"] and "pullPolicy" not in etcd["jobs"]["kubectl"]


def test_the_subchart_keeps_its_datastore():
    assert kamaji_values()["kamaji-etcd"]["deploy"] is True
    assert kamaji_values()["kamaji-etcd"]["datastore"] == {"enabled": True, "name": "default"}


@pytest.mark.parametrize("ref", versions.KAMAJI_ETCD_IMAGES)
def test_each_reference_is_exact_and_not_latest(ref):
    parsed = ImageRef.parse(ref)
    assert parsed.name == ref, "fully qualified, as the mirror keeps it"
    assert parsed.tag and parsed.tag != "latest"


def test_the_kubectl_tag_is_the_charts_for_the_management_cluster():
    """The chart's rule (etcd.jobsTagKubeVersion): `v<major>.<minor>` of the cluster it meets."""
    major, minor, _ = versions.MANAGEMENT_KUBERNETES_VERSION.removeprefix("v").split(".")
    assert versions.KAMAJI_ETCD_KUBECTL_IMAGE == f"docker.io/clastix/kubectl:v{major}.{minor}"


def test_the_etcd_image_is_the_charts_app_version_and_the_job_client_its_shell_image():
    assert versions.KAMAJI_ETCD_IMAGE == "quay.io/coreos/etcd:v3.6.12"
    assert versions.KAMAJI_ETCD_CLIENT_IMAGE == "quay.io/coreos/etcd:v3.5.6"
    assert versions.KAMAJI_ETCD_CFSSL_IMAGE == f"docker.io/cfssl/cfssl:{versions.CFSSL_VERSION}"


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("Pulumi.dev.yaml", versions.KAMAJI_ETCD_IMAGES),
        # each team's etcd takes its certificates from cert-manager: no cfssl job
        ("Pulumi.platform.yaml", tuple(r for r in versions.KAMAJI_ETCD_IMAGES if "cfssl" not in r)),
    ],
)
def test_the_image_list_names_kamaji_etcds_images_exactly(stack, expected):
    cfg = load_stack_file(ROOT / stack, secrets_set=True)
    needs = [n for n in image_set.images(cfg) if n.why.startswith("kamaji-etcd")]
    assert [n.ref for n in needs] == list(expected)
    assert all(n.puller == image_set.MANAGEMENT and not n.tag_note for n in needs)


def test_a_team_stack_lists_none_of_them():
    cfg = load_stack_file(ROOT / "Pulumi.team-a.yaml", secrets_set=True)
    assert not [n for n in image_set.images(cfg) if n.ref in versions.KAMAJI_ETCD_IMAGES]
