"""The DataStore's teardown against a real kube-apiserver with Kamaji's CRDs: a DataStore held
by Kamaji's finalizer is not gone until Kamaji lets it go (a stand-in removes the finalizer, as
Kamaji does once no TenantControlPlane uses it); while a tenant still uses it, the error names
that tenant and what to do; a DataStore already gone is done."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client

from components.kube.client import core_api
from components.kube.waiting import wait_until
from components.lifecycle.datastore_teardown import GROUP, VERSION, DataStoreInUseError, delete_datastore, tenants_using
from tests.support.kamaji_crd import DATASTORES, TENANT_CONTROL_PLANES, crd

pytestmark = pytest.mark.integration
FINALIZER = "kamaji.clastix.io/TenantControlPlane"
_REF = {"secretReference": {"name": "etcd-certs", "namespace": "default", "keyPath": "tls.crt"}}
# As Kamaji's chart writes it: the etcd CA and a client certificate, each by Secret reference.
TLS = {
    "certificateAuthority": {"certificate": _REF, "privateKey": _REF},
    "clientCertificate": {"certificate": _REF, "privateKey": _REF},
}


@pytest.fixture(scope="module")
def kamaji_api(cluster):
    ext = client.ApiextensionsV1Api(cluster.api_client())
    for name in (DATASTORES, TENANT_CONTROL_PLANES):
        try:
            ext.create_custom_resource_definition(crd(name))
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    api = client.CustomObjectsApi(cluster.api_client())

    def served() -> bool:  # the CRDs are served a moment after they are made
        try:
            api.list_cluster_custom_object(GROUP, VERSION, "datastores")
            api.list_cluster_custom_object(GROUP, VERSION, "tenantcontrolplanes")
        except client.ApiException:
            return False
        return True

    wait_until(served, timeout=30, what="Kamaji's CRDs")
    return api


def datastore(api, name: str) -> None:
    api.create_cluster_custom_object(
        GROUP,
        VERSION,
        "datastores",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DataStore",
            "metadata": {"name": name, "finalizers": [FINALIZER]},
            "spec": {
                "driver": "etcd",
                "endpoints": ["etcd-0:2379"],
                "tlsConfig": TLS,
            },
        },
    )


def let_go(api, name: str) -> None:
    """What Kamaji does once no tenant uses the DataStore."""
    api.patch_cluster_custom_object(GROUP, VERSION, "datastores", name, {"metadata": {"finalizers": None}})


def test_it_waits_for_kamaji_to_let_the_datastore_go(cluster, kamaji_api):
    datastore(kamaji_api, "ds-free")
    releaser = threading.Timer(2.0, let_go, (kamaji_api, "ds-free"))
    releaser.start()
    start = time.monotonic()
    delete_datastore(core_api(cluster.kubeconfig_text), "ds-free", timeout=60, interval=0.5)
    assert time.monotonic() - start >= 2.0  # not before the finalizer went
    releaser.join()
    with pytest.raises(client.ApiException) as gone:
        kamaji_api.get_cluster_custom_object(GROUP, VERSION, "datastores", "ds-free")
    assert gone.value.status == 404


def test_a_tenant_still_on_it_is_named(cluster, kamaji_api):
    datastore(kamaji_api, "ds-used")
    kamaji_api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "tenantcontrolplanes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TenantControlPlane",
            "metadata": {"name": "team-x"},
            "spec": {
                "dataStore": "ds-used",
                "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
                "kubernetes": {"version": "v1.35.1", "kubelet": {}},
                "networkProfile": {"port": 6443},
            },
        },
    )
    core = core_api(cluster.kubeconfig_text)
    try:
        assert tenants_using(core, "ds-used") == ["default/team-x"]
        started = time.monotonic()
        with pytest.raises(DataStoreInUseError) as err:
            delete_datastore(core, "ds-used", timeout=60, interval=0.5)
        assert "default/team-x" in str(err.value) and "destroy their stacks first" in str(err.value)
        assert time.monotonic() - started < 10  # refused at once, not after a wait
        # and left as it was: a deleted DataStore cannot be taken back
        kept = kamaji_api.get_cluster_custom_object(GROUP, VERSION, "datastores", "ds-used")
        assert "deletionTimestamp" not in kept["metadata"]
    finally:
        kamaji_api.delete_namespaced_custom_object(GROUP, VERSION, "default", "tenantcontrolplanes", "team-x")
        let_go(kamaji_api, "ds-used")


def test_a_datastore_already_gone_is_done(cluster, kamaji_api):
    delete_datastore(core_api(cluster.kubeconfig_text), "never-made", timeout=1)
