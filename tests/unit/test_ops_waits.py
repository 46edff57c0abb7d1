"""The ops waits on a fake API client, in milliseconds: each succeeds as soon as the tenant
shows what it waits for, and at its deadline says what was last seen and the likely cause
(the real API server stays the judge in the integration tier)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiException

from components.domain import hami_annotations as ha
from components.lifecycle import hami_registration, node_membership, webhook_probe
from tests.support.fake_kube import FakeCore


class Sequenced:
    """A fake call that answers from a script, one item per call (the last repeats); an
    exception in the script is raised."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), 0

    def __call__(self, *_args, **_kw):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        return answer


def pod_back(scheduler: str):
    """The dry-run pod as the API server's JSON gives it back."""
    return SimpleNamespace(data=json.dumps({"spec": {"schedulerName": scheduler}}).encode())


def test_webhook_probe_passes_once_hami_mutates_and_keeps_trying_through_api_errors():
    core = SimpleNamespace(
        create_namespaced_pod=Sequenced(
            ApiException(status=500, reason="boom"), pod_back("default-scheduler"), pod_back("hami-scheduler")
        )
    )
    assert webhook_probe.probe(core, "default", timeout=5, interval=0) == "hami-scheduler"
    assert core.create_namespaced_pod.calls == 3


@pytest.mark.parametrize(
    ("answer", "seen"),
    [
        (pod_back("default-scheduler"), "'default-scheduler'"),
        (ApiException(status=403, reason="Forbidden"), "'error: Forbidden'"),
    ],
)
def test_webhook_probe_names_what_it_saw_at_its_deadline(answer, seen):
    core = SimpleNamespace(create_namespaced_pod=Sequenced(answer))
    with pytest.raises(webhook_probe.WebhookUnreachableError) as err:
        webhook_probe.probe(core, "team-ns", timeout=0.05, interval=0.01)
    text = str(err.value)
    assert f"schedulerName {seen}" in text and "within 0.05 s" in text and "Konnectivity" in text
    assert core.create_namespaced_pod.calls >= 2


METRICS_283 = 'GPUDeviceMemoryLimit{nodeid="n0",deviceuuid="GPU-0"} 1\n'
METRICS_BOTH = METRICS_283 + 'GPUDeviceMemoryLimit{nodeid="n0",deviceuuid="GPU-1"} 1\n'


def metrics(text: str):
    return SimpleNamespace(data=text.encode())


def nodes(*offered: str, waiting: tuple[str, ...] = ()):
    """The mock-GPU nodes as listed: `offered` with the plugin's resources allocatable, `waiting` without."""

    def node(name: str, on: bool) -> dict:
        value = "100" if on else "0"
        return {"metadata": {"name": name}, "status": {"allocatable": {ha.RES_GPUMEM: value, ha.RES_GPUCORES: value}}}

    items = [node(n, True) for n in offered] + [node(n, False) for n in waiting]
    return SimpleNamespace(data=json.dumps({"items": items}).encode())


def test_registration_waits_until_every_card_is_listed():
    proxy = Sequenced(
        ApiException(status=503, reason="Service Unavailable"), metrics(METRICS_283), metrics(METRICS_BOTH)
    )
    core = SimpleNamespace(connect_get_namespaced_service_proxy_with_path=proxy, list_node=Sequenced(nodes("n0")))
    assert hami_registration.wait_registered(core, {"n0": ["GPU-0", "GPU-1"]}, timeout=5, interval=0) == {"n0": 2}
    assert proxy.calls == 3


def test_registration_waits_until_each_kubelet_offers_the_cards():
    """HAMi lists the cards from the annotation; a node whose device plugin has not registered
    with its kubelet would refuse a GPU pod at admission: the gate waits for it, and names it."""
    plugin = {
        "metadata": {"name": "hami-device-plugin-x1"},
        "status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]},
    }
    core = SimpleNamespace(
        connect_get_namespaced_service_proxy_with_path=Sequenced(metrics(METRICS_BOTH)),
        list_node=Sequenced(nodes(waiting=("n0",))),
        list_namespaced_pod=Sequenced(SimpleNamespace(data=json.dumps({"items": [plugin]}).encode())),
    )
    with pytest.raises(hami_registration.NotRegisteredError) as err:
        hami_registration.wait_registered(core, {"n0": ["GPU-0", "GPU-1"]}, timeout=0.05, interval=0.01)
    text = str(err.value)
    assert "n0 (2 of 2 cards missing)" in text and "kubelet of n0 does not offer nvidia.com/gpumem" in text
    assert "n0: its hami-system pods: hami-device-plugin-x1 Pending (ImagePullBackOff)" in text
    core.list_node = Sequenced(nodes(waiting=("n0",)), nodes(), nodes("n0"))  # not listed, then offered
    assert hami_registration.wait_registered(core, {"n0": ["GPU-0", "GPU-1"]}, timeout=5, interval=0) == {"n0": 2}
    assert core.list_node.calls == 3


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        (metrics(METRICS_283), "has not taken these nodes' cards"),
        (ApiException(status=503, reason="Service Unavailable"), "no ready endpoint"),
    ],
)
def test_registration_names_the_missing_cards_and_the_cause(answer, cause):
    core = SimpleNamespace(
        connect_get_namespaced_service_proxy_with_path=Sequenced(answer), list_node=Sequenced(nodes("n0"))
    )
    with pytest.raises(hami_registration.NotRegisteredError) as err:
        hami_registration.wait_registered(core, {"n0": ["GPU-0", "GPU-1"]}, timeout=0.05, interval=0.01)
    text = str(err.value)
    missing = "n0 (1 of 2 cards missing)" if "taken" in cause else "n0 (2 of 2 cards missing)"
    assert missing in text and cause in text and "within 0.05 s" in text


def test_a_programming_error_in_a_wait_is_not_retried():
    core = SimpleNamespace(connect_get_namespaced_service_proxy_with_path=Sequenced(KeyError("bug")))
    with pytest.raises(KeyError):
        hami_registration.wait_registered(core, {"n0": ["GPU-0"]}, timeout=5, interval=0)
    assert core.connect_get_namespaced_service_proxy_with_path.calls == 1


def with_machine(core: FakeCore, name: str, machine: str) -> None:
    core.add_node(name)
    core.nodes[name]["metadata"]["uid"] = f"uid-{name}"
    core.nodes[name]["status"] = {"nodeInfo": {"machineID": machine}}


def test_wait_for_node_returns_the_uid_once_the_workers_machine_registered():
    core = FakeCore()
    reads = {"n": 0}
    real_read = core.read_node

    def read_node(name, **kw):
        reads["n"] += 1
        if reads["n"] == 2:
            with_machine(core, name, "old-machine")  # a predecessor's Node first
        if reads["n"] == 3:
            with_machine(core, name, "m-1")
        return real_read(name, **kw)

    core.read_node = read_node
    assert node_membership.wait_for_node(core, "w-0", "m-1", timeout=5, interval=0) == "uid-w-0"
    assert reads["n"] == 3


@pytest.mark.parametrize(("present", "found"), [(False, "no Node"), (True, "a Node with machine ID 'other'")])
def test_wait_for_node_says_what_registered_instead(present, found):
    core = FakeCore()
    if present:
        with_machine(core, "w-0", "other")
    with pytest.raises(node_membership.NodeNotRegisteredError) as err:
        node_membership.wait_for_node(core, "w-0", "m-1", timeout=0.05, interval=0.01)
    assert f"node w-0: {found} after 0.05 s, expected machine ID 'm-1'" in str(err.value)
