"""The registration gate through the API server's service proxy, as the lab reads HAMi's metrics:
a stand-in serving HAMi's metric families (2.8.3's and 2.10's names) behind a Service named as
the chart names it. Without HAMi's binary, the stand-in's text is what HAMi's collector writes."""

from __future__ import annotations

import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from components.domain.names import HAMI_NAMESPACE
from components.lifecycle import hami_registration as hr
from tests.support.cluster import add_node, free_port, routable_ip

pytestmark = pytest.mark.integration
EXPECTED = {"n1": ["GPU-a-n1-0"], "n2": ["GPU-a-n2-0", "GPU-a-n2-1"]}


class Metrics(BaseHTTPRequestHandler):
    text = ""

    def do_GET(self):  # noqa: N802 - http.server API
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def v283(node: str, dev: str) -> str:
    return f'GPUDeviceMemoryLimit{{deviceidx="0",deviceuuid="{dev}",nodeid="{node}"}} 8.589934592e+10\n'


def v210(node: str, dev: str) -> str:
    return f'hami_gpu_memory_limit_bytes{{device_index="0",device_type="NVIDIA",device_uuid="{dev}",node="{node}"}} 1\n'


def offer(core, node: str, on: bool) -> None:
    """What the mock device plugin's registration with the node's kubelet shows (or its absence)."""
    value = "100" if on else "0"
    resources = {ha.RES_GPUMEM: value, ha.RES_GPUCORES: value}
    core.patch_node_status(node, {"status": {"capacity": resources, "allocatable": resources}})


@pytest.fixture
def hami_metrics(cluster):
    core = cluster.core()
    for node in EXPECTED:
        add_node(cluster, node)
        offer(core, node, True)
    ip, port = routable_ip(), free_port()
    server = ThreadingHTTPServer((ip, port), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=HAMI_NAMESPACE)))
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    # The API server proxies only to endpoint addresses that are Pods with that IP: the
    # scheduler's pod, as the chart runs it, here an API object with the stand-in's address.
    pod_name = f"hami-scheduler-{uuid.uuid4().hex[:6]}"
    pod = {"metadata": {"name": pod_name}, "spec": {"containers": [{"name": "c", "image": "hami"}]}}
    core.create_namespaced_pod(HAMI_NAMESPACE, pod)
    core.patch_namespaced_pod_status(pod_name, HAMI_NAMESPACE, {"status": {"podIP": ip, "podIPs": [{"ip": ip}]}})
    svc = {
        "metadata": {"name": "hami-scheduler"},
        "spec": {"ports": [{"name": "monitor", "port": 31993, "targetPort": 9395}]},
    }
    core.create_namespaced_service(HAMI_NAMESPACE, svc)

    def endpoints(ready: bool) -> None:
        subset = {"ports": [{"name": "monitor", "port": port}]}
        target = {"kind": "Pod", "namespace": HAMI_NAMESPACE, "name": pod_name}
        subset["addresses" if ready else "notReadyAddresses"] = [{"ip": ip, "targetRef": target}]
        body = {"metadata": {"name": "hami-scheduler"}, "subsets": [subset]}
        try:
            core.replace_namespaced_endpoints("hami-scheduler", HAMI_NAMESPACE, body)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespaced_endpoints(HAMI_NAMESPACE, body)

    yield endpoints
    server.shutdown()
    for delete in (core.delete_namespaced_service, core.delete_namespaced_endpoints):
        try:
            delete("hami-scheduler", HAMI_NAMESPACE)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    core.delete_namespaced_pod(pod_name, HAMI_NAMESPACE, grace_period_seconds=0)
    for node in EXPECTED:
        core.delete_node(node)


@pytest.mark.parametrize("metric", [v283, v210], ids=["hami-2.8.3", "hami-2.10"])
def test_registered_cards_are_read_through_the_service_proxy(cluster, hami_metrics, metric):
    hami_metrics(ready=True)
    Metrics.text = "".join(metric(n, d) for n, devs in EXPECTED.items() for d in devs)
    assert hr.wait_registered(cluster.core(), EXPECTED, timeout=10, interval=0.5) == {"n1": 1, "n2": 2}


def test_a_node_not_registered_in_time_is_named_with_the_likely_cause(cluster, hami_metrics):
    hami_metrics(ready=True)
    Metrics.text = v283("n1", "GPU-a-n1-0") + v283("n2", "GPU-a-n2-0")
    with pytest.raises(hr.NotRegisteredError) as err:
        hr.wait_registered(cluster.core(), EXPECTED, timeout=2, interval=0.5)
    text = str(err.value)
    assert "n2 (1 of 2 cards missing)" in text and "n1" not in text.split("within")[0]
    assert "nvidia.com/gpu > 0" in text and "hami.io/node-nvidia-register" in text


def test_a_node_whose_kubelet_does_not_offer_the_cards_yet_is_named(cluster, hami_metrics):
    hami_metrics(ready=True)
    Metrics.text = "".join(v210(n, d) for n, devs in EXPECTED.items() for d in devs)
    offer(cluster.core(), "n2", False)
    with pytest.raises(hr.NotRegisteredError) as err:
        hr.wait_registered(cluster.core(), EXPECTED, timeout=2, interval=0.5)
    text = str(err.value)
    assert "n2 (2 of 2 cards missing)" in text and "n1" not in text.split("within")[0]
    assert "kubelet of n2 does not offer nvidia.com/gpumem and nvidia.com/gpucores" in text
    assert "n2: its hami-system pods: none" in text  # no device plugin pod there
    offer(cluster.core(), "n2", True)
    assert hr.wait_registered(cluster.core(), EXPECTED, timeout=10, interval=0.5) == {"n1": 1, "n2": 2}


def test_no_ready_scheduler_is_said_so(cluster, hami_metrics):
    hami_metrics(ready=False)
    with pytest.raises(hr.NotRegisteredError) as err:
        hr.wait_registered(cluster.core(), EXPECTED, timeout=2, interval=0.5)
    assert "no ready endpoint" in str(err.value) or "503" in str(err.value)
