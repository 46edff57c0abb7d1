"""HAMi's reasons from the messages HAMi 2.8.3 and 2.10 write (format strings from
pkg/scheduler/score.go `%d nodes %s(%s)`, pkg/util/nodelock `node %s has been locked within %v`)."""

from components.kube.hami_reasons import NODE_LOCK_CONTENTION, parse


def event(reason: str, message: str, when: str = "2026-12-02T10:00:00Z") -> dict:
    return {"reason": reason, "message": message, "lastTimestamp": when, "metadata": {}}


GENERIC = "0/1 nodes are available: 1 NodeUnfitPod. preemption: 0/1 nodes are available: 1 No preemption victims."


def test_hami_283_generic_condition_named_from_its_filtering_events():
    events = [
        event("FilteringFailed", "1 nodes CardInsufficientCore(team-a-worker-0)"),
        event("FilteringFailed", "no available node, 1 nodes do not meet"),
    ]
    r = parse(events, GENERIC)
    assert r.by_node == {"team-a-worker-0": ["CardInsufficientCore"]}
    assert r.text.startswith("HAMi: CardInsufficientCore on team-a-worker-0 (not enough GPU cores")
    assert GENERIC in r.text


def test_several_reasons_and_nodes_in_one_round():
    events = [
        event("FilteringFailed", "2 nodes CardInsufficientMemory(n1,n2)"),
        event("FilteringFailed", "1 nodes CardTypeMismatch(n3)"),
        event("FilteringFailed", "1 nodes CardInsufficientCore(n1)", when="2026-12-02T09:59:00Z"),  # older round
    ]
    r = parse(events)
    assert r.by_node == {"n1": ["CardInsufficientMemory"], "n2": ["CardInsufficientMemory"], "n3": ["CardTypeMismatch"]}
    assert r.codes == ["CardInsufficientMemory", "CardTypeMismatch"]
    assert "no card of the node is of a type the pod allows" in r.text


def test_hami_210_reason_inside_the_scheduler_message():
    msg = "0/1 nodes are available: 1 1/1 CardInsufficientMemory. preemption: 0/1 nodes are available"
    r = parse([], msg)
    assert r.codes == ["CardInsufficientMemory"]


def test_node_lock_contention_both_versions():
    for message in (
        "node team-a-worker-0 has been locked within 5m0s",
        "node team-a-worker-0 has been locked within 5m0s: node lock contention",
    ):
        r = parse([event("BindingFailed", message)])
        assert r.by_node == {"team-a-worker-0": [NODE_LOCK_CONTENTION]}
        assert "node lock contention" in r.text


def test_quota_and_unregistered_node():
    assert parse([], "0/1 nodes are available: 1 node unregistered.").codes == ["NodeUnregistered"]
    r = parse([event("FilteringFailed", "1 nodes ResourceQuotaNotFit(n1)")])
    assert r.by_node == {"n1": ["ResourceQuotaNotFit"]} and "quota is exceeded" in r.text


def test_nothing_yet():
    assert parse([]).text == "no scheduling event yet"


def test_a_round_spread_over_two_seconds_is_read_whole():
    """HAMi 2.10 writes the reason, then `no available node`, a second or two apart."""
    events = [
        event("FilteringFailed", "1 nodes CardInsufficientMemory(team-a-worker-0)", when="2026-12-02T10:00:00Z"),
        event("FilteringFailed", "no available node, 1 nodes do not meet", when="2026-12-02T10:00:02Z"),
    ]
    assert parse(events).by_node == {"team-a-worker-0": ["CardInsufficientMemory"]}


def test_bind_error_in_the_scheduler_condition():
    """kube-scheduler 1.35 shows an extender bind error as the condition message (SchedulerError)."""
    r = parse([], "node team-a-worker-0 has been locked within 5m0s: node lock contention")
    assert r.by_node == {"team-a-worker-0": [NODE_LOCK_CONTENTION]}
