"""The TenantControlPlane spec against Kamaji's CRD schema (a byte copy of upstream, in shared/)."""

import ipaddress

import jsonschema
import pytest

from components.config.load import load_stack_config
from components.config.names import datastore_schema
from components.tenant.control_plane import control_plane_spec
from tests.support.harness import ROOT, load_config_file
from tests.support.kamaji_crd import spec_schema


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
    assert a["addons"]["coreDNS"] == {} and a["addons"]["kubeProxy"] == {}
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
