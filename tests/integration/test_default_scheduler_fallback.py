"""What HamiWebhookProbe guards against, shown with the real kube-scheduler: when HAMi's webhook is
not reached, a GPU pod keeps `default-scheduler`, and on a node whose capacity shows
`nvidia.com/gpu` (as the mock setup seeds it) it is placed with no HAMi accounting at all."""

from __future__ import annotations

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from components.lifecycle import webhook_probe as wp
from components.providers.node_gpu_capacity import NodeGpuCapacityProvider
from tests.support.cluster import add_node, start_cluster
from tests.support.tools import require
from tests.support.waits import settles

pytestmark = pytest.mark.integration


@pytest.fixture
def scheduled_cluster(tools):
    """A cluster of its own: a running scheduler would bind the other tests' unbound pods."""
    require(tools, "kube-apiserver", "etcd", "kube-scheduler", "openssl")
    c = start_cluster(tools)
    c.start_scheduler()
    yield c
    c.stop()


def test_without_the_webhook_a_gpu_pod_bypasses_hami(scheduled_cluster):
    cluster = scheduled_cluster
    core = cluster.core()
    add_node(cluster, "fallback-node")
    NodeGpuCapacityProvider().create({"kubeconfig": cluster.kubeconfig_text, "node": "fallback-node", "count": 10})
    core.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="unguarded"),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="c", image="busybox", resources=client.V1ResourceRequirements(limits={ha.RES_GPU: "1"})
                    )
                ]
            ),
        ),
    )
    settles(lambda: core.read_namespaced_pod("unguarded", "default").spec.node_name, timeout=90)
    pod = core.read_namespaced_pod("unguarded", "default")
    assert pod.spec.node_name == "fallback-node"
    assert pod.spec.scheduler_name == "default-scheduler"
    assert ha.DEVICES_ALLOCATED not in (pod.metadata.annotations or {})  # HAMi never saw it
    # ...which is exactly what the probe reports instead of passing
    with pytest.raises(wp.WebhookUnreachableError):
        wp.probe(core, "default", timeout=1, interval=0.5)
