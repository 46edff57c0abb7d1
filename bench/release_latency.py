"""Delay from HAMi's bind to the node lock's removal, over 50+ pods, against a real kube-apiserver.

Each pod is created, then bound by the HAMi Bind stand-in (tests/integration/hami_stand_in: the
lock, bind-phase allocating and the Binding, exactly as HAMi writes them; HAMi's scheduler itself
cannot be built on these machines). The release runs as the BindRelease provider runs it
(components.ops.lock_release.wait_and_release_pods, default 0.5 s poll), for a Deployment-like set
of pods found by label. Pods are bound one after another on one node, as they would be when they
share a card: the next bind waits for the lock to be free. Prints median and p99 of the delay,
beside HAMi's 300 s lock expiry as a ratio.
Usage: bash tools/build.sh && .venv/bin/python bench/release_latency.py [pods]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402

from components import lock_release  # noqa: E402
from tests.integration.cluster import add_node, start_cluster  # noqa: E402
from tests.integration.conftest import tools_env  # noqa: E402
from tests.integration.hami_stand_in import hami_bind, wait_lock_free  # noqa: E402

HAMI_LOCK_EXPIRY_S = 300.0


def main(count: int = 50) -> None:
    cluster = start_cluster(tools_env())
    try:
        core = cluster.core()
        add_node(cluster, "bench-node")
        for i in range(count):
            core.create_namespaced_pod(
                "default",
                client.V1Pod(
                    metadata=client.V1ObjectMeta(name=f"bench-{i}", labels={"bench": "release"}),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
                ),
            )
        results: list = []
        releaser = threading.Thread(
            target=lambda: results.extend(
                lock_release.wait_and_release_pods(
                    cluster.core(), "default", timeout=60 + count * 5, selector="bench=release", count=count
                )
            )
        )
        releaser.start()
        delays = []
        started = time.monotonic()
        for i in range(count):
            bound = hami_bind(core, "default", f"bench-{i}", "bench-node")
            delays.append(wait_lock_free(core, "bench-node") - bound)
        total = time.monotonic() - started
        releaser.join()
        assert all(r.outcome.status == lock_release.RELEASED for r in results), results[:3]
        delays.sort()
        median = statistics.median(delays)
        p99 = delays[min(len(delays) - 1, round(0.99 * (len(delays) - 1)))]
        print(f"pods bound one after another on one node: {count}")
        print(f"bind -> lock removed: median {median:.3f} s, p99 {p99:.3f} s, max {delays[-1]:.3f} s")
        print(f"HAMi lock expiry without release: {HAMI_LOCK_EXPIRY_S:.0f} s per pod")
        print(
            f"ratio expiry / median delay: {HAMI_LOCK_EXPIRY_S / median:,.0f}x; "
            f"expiry / p99: {HAMI_LOCK_EXPIRY_S / p99:,.0f}x"
        )
        print(
            f"all {count} pods bound in {total:.1f} s (with expiry alone: >= {(count - 1) * HAMI_LOCK_EXPIRY_S:,.0f} s)"
        )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
