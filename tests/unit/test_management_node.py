"""The management node's kubeadm configuration and storage objects, as the stack writes them:
what each setting is for is in components.nodes.management_node and components.nodes.local_path."""

from __future__ import annotations

import json

import pytest
import yaml

from components.config import image_set, versions
from components.config.load import load_stack_config
from components.nodes import local_path
from components.nodes.management_node import INIT, init_configuration, init_documents
from tests.support.harness import ROOT, load_config_file

DEV = {k.removeprefix("gpu-tenancy:"): v for k, v in load_config_file(ROOT / "Pulumi.dev.yaml").items()}


def _docs(address: str = "172.30.0.2") -> dict[str, dict]:
    docs = init_documents("gpu-lab-management", address, versions.MANAGEMENT_KUBERNETES_VERSION, "gpu-lab")
    return {d["kind"]: d for d in docs}


def test_the_only_node_is_untainted_advertises_its_address_and_makes_no_join_token():
    init = _docs()["InitConfiguration"]
    assert init["nodeRegistration"]["taints"] == []
    assert init["localAPIEndpoint"] == {"advertiseAddress": "172.30.0.2", "bindPort": 6443}
    assert {"name": "node-ip", "value": "172.30.0.2"} in init["nodeRegistration"]["kubeletExtraArgs"]
    assert {"bootstrap-token", "show-join-command"} <= set(init["skipPhases"])


def test_the_cluster_answers_on_the_address_and_kube_proxy_leaves_conntrack_alone():
    docs = _docs("172.31.0.9")
    cluster = docs["ClusterConfiguration"]
    assert cluster["controlPlaneEndpoint"] == "172.31.0.9:6443"
    assert "172.31.0.9" in cluster["apiServer"]["certSANs"]
    assert cluster["kubernetesVersion"] == versions.MANAGEMENT_KUBERNETES_VERSION
    assert cluster["networking"]["podSubnet"] and cluster["networking"]["serviceSubnet"]
    assert docs["KubeProxyConfiguration"]["conntrack"] == {"maxPerCore": 0}


def test_the_configuration_is_one_yaml_stream_and_an_unpinned_version_is_refused():
    text = init_configuration("n", "10.0.0.2", versions.MANAGEMENT_KUBERNETES_VERSION, "lab")
    assert [d["kind"] for d in yaml.safe_load_all(text)] == [
        "InitConfiguration",
        "ClusterConfiguration",
        "KubeProxyConfiguration",
    ]
    with pytest.raises(ValueError, match="v1.34.0"):
        init_documents("n", "10.0.0.2", "v1.34.0", "lab")


def test_init_skips_kubeadm_s_cgroup_v1_check_only_on_cgroup_v1():
    assert "[ -f /sys/fs/cgroup/cgroup.controllers ] || ignore=--ignore-preflight-errors=SystemVerification" in INIT
    assert INIT.count("--ignore-preflight-errors") == 1


def test_kubeadm_s_images_per_pinned_version():
    for version in versions.KIND_NODE_IMAGES:
        images = versions.kubeadm_images(version)
        assert len(images) == 7 and len(set(images)) == 7
        assert all(i.startswith("registry.k8s.io/") for i in images)
        assert f"registry.k8s.io/kube-proxy:{version}" in images


def test_the_image_list_follows_the_distribution():
    kubeadm = image_set.images(load_stack_config("gpu-tenancy", DEV, base=ROOT))
    management = {n.ref for n in kubeadm if n.puller == image_set.MANAGEMENT}
    pulled = {i for i in versions.kubeadm_images(versions.MANAGEMENT_KUBERNETES_VERSION) if "/pause:" not in i}
    assert pulled | {versions.LOCAL_PATH_PROVISIONER_IMAGE} <= management
    engine = {n.ref for n in kubeadm if n.puller == image_set.DOCKER_ENGINE}
    assert f"{versions.LAB_NODE_REPOSITORY}:{versions.MANAGEMENT_KUBERNETES_VERSION}" in engine
    assert versions.K3S_IMAGE not in engine

    k3s = dict(DEV, cluster={**DEV.get("cluster", {}), "distribution": "k3s"})
    listed = image_set.images(load_stack_config("gpu-tenancy", k3s, base=ROOT))
    assert versions.K3S_IMAGE in {n.ref for n in listed if n.puller == image_set.DOCKER_ENGINE}
    # The tenants' control planes still pull their kube-apiserver etc.; kubeadm's own are gone.
    own = {i for i in pulled if "/etcd:" in i or "/kube-proxy:" in i or "/coredns/" in i}
    own.add(versions.LOCAL_PATH_PROVISIONER_IMAGE)
    assert not own & {n.ref for n in listed if n.puller == image_set.MANAGEMENT}


def _by_kind(kind: str) -> list[dict]:
    return [o for o in local_path.manifests() if o["kind"] == kind]


def test_the_provisioner_sees_cluster_wide_only_what_a_provisioner_must():
    (cluster_role,) = _by_kind("ClusterRole")
    cluster_wide = {r for rule in cluster_role["rules"] for r in rule["resources"]}
    assert cluster_wide == {"nodes", "persistentvolumeclaims", "persistentvolumes", "events", "storageclasses"}
    writes = {
        r
        for rule in cluster_role["rules"]
        for r in rule["resources"]
        if set(rule["verbs"]) & {"create", "update", "patch", "delete"}
    }
    assert writes == {"persistentvolumes", "events"}
    (role,) = _by_kind("Role")
    assert role["metadata"]["namespace"] == local_path.NAMESPACE
    assert {r for rule in role["rules"] for r in rule["resources"]} == {"pods", "pods/log", "configmaps"}


def test_the_default_class_waits_for_the_consumer_and_deletes_with_the_claim():
    (sc,) = _by_kind("StorageClass")
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        local_path.PROVISIONER,
        "WaitForFirstConsumer",
        "Delete",
    )


def test_volumes_live_under_the_node_s_var_and_helpers_run_the_node_s_busybox():
    (cm,) = _by_kind("ConfigMap")
    config = json.loads(cm["data"]["config.json"])
    assert config["nodePathMap"][0]["paths"] == [local_path.VOLUMES_PATH]
    assert local_path.VOLUMES_PATH.startswith("/var/")
    helper = yaml.safe_load(cm["data"]["helperPod.yaml"])
    (container,) = helper["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (versions.LAB_BUSYBOX_IMAGE, "IfNotPresent")
    (deployment,) = _by_kind("Deployment")
    (main,) = deployment["spec"]["template"]["spec"]["containers"]
    assert main["image"] == versions.LOCAL_PATH_PROVISIONER_IMAGE
