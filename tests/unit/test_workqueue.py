"""The work queue's contract (client-go's): de-duplicated, never one key to two workers, a key
added while processed comes back once done, per-key exponential backoff, a bound."""

from __future__ import annotations

import threading
import time

from components.controllers.release.workqueue import WorkQueue


def test_a_key_is_queued_once():
    q = WorkQueue()
    assert q.add("a") and q.add("a") and q.add("b")
    assert len(q) == 2
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]


def test_a_key_being_processed_is_not_handed_out_again_until_done():
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    assert q.get(0) is None, "handed to a second worker while processing"
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None


def test_backoff_grows_per_key_is_capped_and_forget_resets_it():
    q = WorkQueue(base_delay=0.01, max_delay=0.04)
    assert [q.add_rate_limited("a") for _ in range(5)] == [0.01, 0.02, 0.04, 0.04, 0.04]
    assert q.backoff("b") == 0.01, "one key's failures slowed another"
    q.forget("a")
    assert q.backoff("a") == 0.01


def test_a_delayed_key_comes_back_after_its_delay():
    q = WorkQueue()
    q.add_after("a", 0.05)
    assert q.get(0) is None
    start = time.monotonic()
    assert q.get(1) == "a"
    assert time.monotonic() - start >= 0.04


def test_the_bound_refuses_adds_past_it():
    q = WorkQueue(max_len=2)
    assert q.add(1) and q.add(2)
    assert not q.add(3)
    assert q.add(2), "a key already queued is not a new add"


def test_shutdown_wakes_a_waiting_worker():
    q = WorkQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    time.sleep(0.05)
    q.shutdown()
    t.join(2)
    assert got == [None]


def test_oldest_wait_counts_keys_ready_for_a_worker_not_those_backing_off():
    now = [0.0]
    q = WorkQueue(base_delay=10, clock=lambda: now[0])
    q.add_rate_limited("backing-off")
    now[0] = 5
    assert q.oldest_wait() == 0.0
    q.add("a")
    now[0] = 8
    q.add("b")
    assert q.oldest_wait() == 3.0
    now[0] = 12  # the backed-off key is ready since 10, after "a"
    assert q.oldest_wait() == 7.0
    assert q.get(0) == "a"
    assert q.oldest_wait() == 4.0  # "b", waiting since 8
