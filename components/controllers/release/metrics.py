"""The release controller's metrics (prometheus_client): what it released, how fast, what it
left alone and why, and what it is waiting for."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    """The controller's Prometheus metrics, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.releases = Counter(
            "gpu_tenancy_releases", "Release attempts that finished, by outcome.", ["outcome"], registry=r
        )
        self.failures = Counter(
            "gpu_tenancy_release_failures", "Releases or API calls that failed, by kind.", ["kind"], registry=r
        )
        self.not_handled = Counter(
            "gpu_tenancy_pods_not_handled",
            "Pods left alone or refused, once per pod and reason (invalid-node-name, node-<status>, refused-<status>).",
            ["reason"],
            registry=r,
        )
        self.retries = Counter("gpu_tenancy_pod_retries", "Pods queued again after their own backoff.", registry=r)
        self.delay = Histogram(
            "gpu_tenancy_release_delay_seconds",
            "Seconds from HAMi's bind time (hami.io/bind-time, whole seconds) to the release.",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.handling = Histogram(
            "gpu_tenancy_release_handling_seconds",
            "Seconds from the watch event showing the pod allocating to its release.",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.early = Counter(
            "gpu_tenancy_locks_freed_at_allocation",
            "Node locks freed when HAMi marked the pod allocating, before its Binding landed.",
            registry=r,
        )
        self.relists = Counter("gpu_tenancy_relists", "Full lists of pods (start, 410 Gone, errors).", registry=r)
        self.watches = Counter("gpu_tenancy_watch_sessions", "Watch requests opened.", registry=r)
        self.last_contact = Gauge(
            "gpu_tenancy_last_api_contact_timestamp_seconds", "When the API server last answered.", registry=r
        )
        self.queue_depth = Gauge("gpu_tenancy_queue_depth", "Pods waiting for a worker.", registry=r)
        self.stuck = Gauge(
            "gpu_tenancy_pods_stuck",
            "Pods bound to a mock node and still allocating past the bound (each retried alone, an Event on each).",
            registry=r,
        )
        self.events = Counter(
            "gpu_tenancy_pod_events", "Events the controller posted on pods, by reason.", ["reason"], registry=r
        )
        self.readmitted = Counter(
            "gpu_tenancy_pods_readmitted",
            "Stack-declared bare pods a kubelet refused at admission, by outcome (made-again, gone).",
            ["outcome"],
            registry=r,
        )
        self.reasons_dropped = Counter(
            "gpu_tenancy_reason_lookups_dropped", "Pending-reason lookups dropped: their queue was full.", registry=r
        )
