"""The TenantControlPlane spec against Kamaji's CRD schema (a byte copy of upstream, in shared/)."""

import ipaddress

import jsonschema
import pytest

from components.config import image_set
from components.config.image_refs import ImageRef
from components.config.load import load_stack_config, load_stack_file
from components.config.versions import (
    KONNECTIVITY_IMAGES,
    KONNECTIVITY_VERSION,
    TENANT_COREDNS_IMAGE,
    coredns_addon,
)
from components.domain.names import datastore_schema
from components.tenant.control_plane import control_plane_spec
from tests.support.harness import ROOT, load_config_file
from tests.support.kamaji_crd import spec_schema

STACK_FILES = sorted([*ROOT.glob("Pulumi.*.yaml"), *ROOT.glob("examples/Pulumi.*.yaml")])


@pytest.fixture(scope="module")
def specs():
    raw = {k.split(":", 1)[1]: v for k, v in load_config_file(ROOT / "Pulumi.dev.yaml").items()}
    cfg = load_stack_config("gpu-tenancy", raw)
    return [
        control_plane_spec(t, cfg.cluster.management_ip, "default", datastore_schema("gpu-tenancy", "dev", t.name))
        for t in cfg.tenants
    ]


def test_specs_validate_against_the_crd(specs):
    schema = spec_schema()
    for spec in specs:
        jsonschema.validate(spec, schema)


def test_schema_rejects_a_broken_spec(specs):
    broken = dict(specs[0])
    broken["controlPlane"] = {"service": {}}  # serviceType is required
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, spec_schema())


def test_cel_rules_the_validator_cannot_run(specs):
    for spec in specs:
        net = spec["networkProfile"]
        for cidr in net["podCidrs"] + net["serviceCidrs"]:
            ipaddress.ip_network(cidr)  # isCIDR
        assert ipaddress.ip_address(net["dnsServiceIPs"][0]) in ipaddress.ip_network(net["serviceCidrs"][0])


def test_addons_named_explicitly_and_nodeport_in_range(specs):
    a, b = specs
    assert "kubeProxy" not in a["addons"]  # the stack's own (kube_proxy.py): Kamaji's takes no config
    assert a["addons"]["konnectivity"]["server"]["port"] == 31132
    assert b["networkProfile"]["port"] == 31444
    assert a["controlPlane"]["service"]["serviceType"] == "NodePort"
    assert a["networkProfile"]["address"] == "172.30.0.2"
    assert "172.30.0.2" in a["networkProfile"]["certSANs"]
    assert a["controlPlane"]["deployment"]["replicas"] == 1
    patches = {p["path"]: p for p in a["kubernetes"]["kubelet"]["configurationJSONPatches"]}
    assert patches["/cgroupDriver"] == {"op": "add", "path": "/cgroupDriver", "value": "systemd"}
    assert a["dataStoreSchema"] == a["dataStoreUsername"] == "gpu_tenancy_dev_team_a"


def test_tenants_run_kamajis_admission_plugins_and_node_restriction(specs):
    """Kamaji's default list (the CRD's) plus NodeRestriction: without it a kubelet could label
    its own Node as a mock-GPU node and have its real cards' locks freed."""
    default = spec_schema()["properties"]["kubernetes"]["properties"]["admissionControllers"]["default"]
    for spec in specs:
        plugins = spec["kubernetes"]["admissionControllers"]
        assert set(plugins) == set(default) | {"NodeRestriction"} and len(plugins) == len(set(plugins))


def test_every_tenant_names_the_pinned_konnectivity_version(specs):
    """Kamaji's own pick, v0.<tenant minor>.0, is v0.35.0 for these v1.35 tenants: not published,
    not buildable here. Server and agent name the version the platform mirrors and builds."""
    assert KONNECTIVITY_VERSION == "v0.36.0"
    for spec in specs:
        minor = spec["kubernetes"]["version"].split(".")[1]
        konnectivity = spec["addons"]["konnectivity"]
        assert konnectivity["server"]["version"] == KONNECTIVITY_VERSION != f"v0.{minor}.0"
        assert konnectivity["agent"] == {"mode": "DaemonSet", "version": KONNECTIVITY_VERSION}
    # both are fields of the CRD (its pruning would drop them silently otherwise)
    addon = spec_schema()["properties"]["addons"]["properties"]["konnectivity"]["properties"]
    assert "version" in addon["server"]["properties"] and "version" in addon["agent"]["properties"]


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_the_image_list_has_the_konnectivity_images_the_specs_name(path):
    """Every tenant of every shipped stack: the list a closed network's mirror is filled from
    names proxy-server and proxy-agent at the version the tenant's spec names, and no other tag."""
    cfg = load_stack_file(path, secrets_set=True)
    needs = image_set.images(cfg)
    konnectivity = {(n.ref, n.puller) for n in needs if "/kas-network-proxy/" in n.ref}
    if not cfg.tenants:
        assert konnectivity == set()
        return
    server, agent = KONNECTIVITY_IMAGES
    assert konnectivity == {(server, image_set.MANAGEMENT), (agent, image_set.WORKERS)}
    assert {ImageRef.parse(ref).tag for ref, _ in konnectivity} == {"v0.36.0"}
    for t in cfg.tenants:
        spec = control_plane_spec(t, str(cfg.cluster.management_ip), "default", "schema")
        for side, image in (("server", server), ("agent", agent)):
            assert f"{image.rsplit(':', 1)[0]}:{spec['addons']['konnectivity'][side]['version']}" == image


def test_each_tenants_coredns_is_the_pinned_image_as_kamajis_kubeadm_names_it(specs):
    """kubeadm's GetDNSImage: `<imageRepository>/coredns:<imageTag>`, the tag read only with the
    repository; so a tenant pulls exactly the image the platform mirrors and builds."""
    for spec in specs:
        dns = spec["addons"]["coreDNS"]
        assert set(dns) == {"imageRepository", "imageTag"}, dns
        assert f"{dns['imageRepository']}/coredns:{dns['imageTag']}" == TENANT_COREDNS_IMAGE


@pytest.mark.parametrize("image", ["registry.k8s.io/coredns:v1.14.2", "docker.io/library/busybox:1.36"])
def test_a_coredns_image_kubeadm_cannot_name_is_refused(image):
    with pytest.raises(ValueError, match="kubeadm names CoreDNS's image"):
        coredns_addon(image)


def test_a_mirrored_coredns_keeps_its_path():
    assert coredns_addon("mirror.example:5000/registry.k8s.io/coredns/coredns:v1.14.2") == {
        "imageRepository": "mirror.example:5000/registry.k8s.io/coredns",
        "imageTag": "v1.14.2",
    }
