"""The report's live column reads HAMi's own accounting from pods on a real kube-apiserver."""

from __future__ import annotations

import pytest
from kubernetes import client

from components.domain import hami_annotations as ha
from components.domain.requests import Quota
from components.reports.capacity_report import allocated_by_hami, build_report, load_stack, render_table
from tests.support.hami_stand_in import hami_event, new_pod

pytestmark = pytest.mark.integration


def test_allocated_is_summed_from_hami_annotations(cluster):
    core = cluster.core()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="report")))
    values = {
        "a": ha.encode_pod_devices([[ha.ContainerDevice("GPU-x-0", 20000, 30)]]),
        "b": ha.encode_pod_devices(
            [[], [ha.ContainerDevice("GPU-x-0", 10000, 10), ha.ContainerDevice("GPU-x-1", 10000, 10)]]
        ),
        "c": "garbage",
    }
    for name, value in values.items():
        core.create_namespaced_pod(
            "report",
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=name, annotations={ha.DEVICES_ALLOCATED: value}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
            ),
        )
    try:
        assert allocated_by_hami(core) == Quota(gpus=3, gpumem_mb=40000, gpucores=50)
        a, _ = build_report(load_stack("dev"), {"team-a": cluster.kubeconfig_text})
        assert a.allocated == Quota(gpus=3, gpumem_mb=40000, gpucores=50)
    finally:
        core.delete_namespace("report")


def test_waiting_pods_are_listed_with_hamis_reason(cluster):
    core = cluster.core()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="report-wait")))
    try:
        new_pod(core, "report-wait", "fourth", scheduler=ha.SCHEDULER_NAME)
        hami_event(core, "report-wait", "fourth", "FilteringFailed", "1 nodes CardInsufficientCore(team-a-worker-0)")
        a, _ = build_report(load_stack("dev"), {"team-a": cluster.kubeconfig_text})
        assert "report-wait/fourth: HAMi: CardInsufficientCore on team-a-worker-0" in " ".join(a.waiting)
        assert "CardInsufficientCore on team-a-worker-0" in render_table([a])
    finally:
        core.delete_namespace("report-wait")
