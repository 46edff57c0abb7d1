"""Kamaji's DataStore deleted while Kamaji still runs, so a destroy ends.

The DataStore comes with Kamaji's chart and carries Kamaji's finalizer, which only Kamaji's
controller removes (once no TenantControlPlane uses it). Uninstalling the chart deletes the
controller and the DataStore together: the finalizer is never removed, and Helm waits for the
DataStore forever. So the stack deletes the DataStore first, after the tenants and before the
chart, and waits for Kamaji to let it go. A DataStore that control planes still use (another
stack's: a team's, when the platform drops the team or is destroyed first) is not deleted at all:
a deleted DataStore cannot be taken back, and Kamaji would stop reconciling the tenants on it. The
refusal names them, before anything else of its stack is removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.kube.client import custom_objects_api_of, get_json, http_status
from components.kube.waiting import TimedOut, wait_until

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

GROUP, VERSION = "kamaji.clastix.io", "v1alpha1"


class DataStoreInUseError(Exception):
    """Kamaji did not let the DataStore go in time: tenants still use it."""


def tenants_using(core: CoreV1Api, datastore: str) -> list[str]:
    """`namespace/name` of each TenantControlPlane on `datastore`."""
    listed = get_json(custom_objects_api_of(core).list_cluster_custom_object, GROUP, VERSION, "tenantcontrolplanes")
    return sorted(
        f"{t['metadata']['namespace']}/{t['metadata']['name']}"
        for t in listed.get("items", [])
        if (t.get("spec") or {}).get("dataStore") == datastore
        or (t.get("status") or {}).get("storage", {}).get("dataStoreName") == datastore
    )


def _exists(core: CoreV1Api, name: str) -> bool:
    try:
        custom_objects_api_of(core).get_cluster_custom_object(GROUP, VERSION, "datastores", name)
    except Exception as exc:
        if http_status(exc) == 404:
            return False
        raise
    return True


def delete_datastore(core: CoreV1Api, name: str, timeout: float, interval: float = 2.0) -> None:
    """Delete the DataStore and wait until it is gone; a DataStore already gone is done; one that
    control planes use is left as it is (DataStoreInUseError naming them)."""
    users = tenants_using(core, name)
    if users:
        raise DataStoreInUseError(
            f"Kamaji's DataStore {name} is not removed: TenantControlPlanes still use it ({', '.join(users)}); "
            "destroy their stacks first (a team's: `pulumi destroy` of its stack), then run this one again"
        )
    try:
        custom_objects_api_of(core).delete_cluster_custom_object(GROUP, VERSION, "datastores", name)
    except Exception as exc:
        if http_status(exc) != 404:
            raise
        return
    try:
        wait_until(lambda: not _exists(core, name), timeout=timeout, interval=interval, what=f"DataStore {name}")
    except TimedOut:
        users = tenants_using(core, name)
        raise DataStoreInUseError(
            f"Kamaji's DataStore {name} was not released within {timeout:g} s"
            + (
                f": TenantControlPlanes still use it ({', '.join(users)}); destroy their stacks first, then "
                "destroy this one again"
                if users
                else ": check that Kamaji's controller runs (kamaji-system), it removes the DataStore's finalizer"
            )
        ) from None
