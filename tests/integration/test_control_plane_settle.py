"""The control plane gate against a real kube-apiserver: it sees what Kamaji has not made yet,
waits for it, and a restart of the API server inside the window makes it wait a whole window
again (what Kamaji's rollouts after Ready do to a tenant's NodePort)."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client

from components.kube.client import core_api
from components.lifecycle.control_plane_settled import MARKERS, observe, wait_settled

pytestmark = pytest.mark.integration


def _make_markers(cluster) -> None:
    core, apps = cluster.core(), client.AppsV1Api(cluster.api_client())
    for namespace, kind, name in MARKERS:
        if namespace not in {n.metadata.name for n in core.list_namespace().items}:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        if kind == "ConfigMap":
            core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": {"kubeconfig": ""}})
        else:
            labels = {"k8s-app": name}
            apps.create_namespaced_daemon_set(
                namespace,
                {
                    "metadata": {"name": name},
                    "spec": {
                        "selector": {"matchLabels": labels},
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {"containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10.1"}]},
                        },
                    },
                },
            )


def _remove_markers(cluster) -> None:
    core, apps = cluster.core(), client.AppsV1Api(cluster.api_client())
    for namespace, kind, name in MARKERS:
        delete = core.delete_namespaced_config_map if kind == "ConfigMap" else apps.delete_namespaced_daemon_set
        try:
            delete(name, namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def test_it_names_what_kamaji_has_not_made_then_passes_once_made(cluster):
    core = core_api(cluster.kubeconfig_text)
    _remove_markers(cluster)
    seen = observe(core)
    assert seen.missing == [f"{kind} {namespace}/{name}" for namespace, kind, name in MARKERS], seen.problem
    assert "not yet made by Kamaji" in seen.problem
    try:
        _make_markers(cluster)
        assert observe(core).problem == ""
    finally:
        _remove_markers(cluster)


def test_an_api_server_restart_inside_the_window_makes_it_wait_a_whole_window_again(cluster):
    core = core_api(cluster.kubeconfig_text)
    _make_markers(cluster)
    try:
        restarted = threading.Event()

        def restart() -> None:
            time.sleep(2)
            cluster.restart_apiserver(down_seconds=2)
            restarted.set()

        thread = threading.Thread(target=restart)
        start = time.monotonic()
        thread.start()
        waited = wait_settled(
            lambda: observe(core), settle=6, timeout=120, interval=0.5, clock=time.monotonic, sleep=time.sleep
        )
        thread.join()
        assert restarted.is_set()
        # 2 s good, the restart (down 2 s, then the API server's own start), then 6 s good again
        assert waited >= 2 + 2 + 6, waited
        assert time.monotonic() - start >= waited
    finally:
        _remove_markers(cluster)
