"""The release controller: finishes HAMi's allocation for every GPU pod on mock-GPU nodes.

The mock device plugin never does what a real one does after Allocate, so without this every
GPU pod after the first on a node waits out HAMi's node lock (5 minutes). It is the one writer
of HAMi's lock and bind phase there (owner-checked, resourceVersion-guarded).
Nothing one pod carries can stop it (controller-runtime's model):
- the watch only records what it sees (the pods worth handling, by key) and always advances;
- workers take keys from a de-duplicating work queue; each pod is handled in its own error
  boundary, and a pod whose handling fails comes back after a backoff of its own while every
  other pod goes on;
- a pod whose annotations name a node that cannot be acted on (no Node can have that name,
  or the API server answers 4xx on it) is "not ours": logged once, counted in
  `gpu_tenancy_pods_not_handled_total`, left until the pod changes;
- HAMi's reasons for Pending pods are looked up by a worker of their own from a bounded,
  de-duplicated queue, off the release path; bookkeeping goes with the pod.
`/healthz` measures the controller itself, what a restart could mend: the first list is done,
the watch advanced within two watch periods, every worker runs, no pod ready for a worker has
waited past `--max-queue-wait`; with `--exit-when-unhealthy` the process exits when it fails, so
the lab's container is restarted. A pod bound to a mock node and still allocating after
`stuck_seconds` is not the controller's ill: it is retried alone, counted in
`gpu_tenancy_pods_stuck` and told by a Warning Event (ReleaseStuck) on the pod; /healthz gives
counts, never names. `/readyz` answers once the first list is done. `/metrics` is
prometheus_client's. All three listen on loopback unless `--listen` says otherwise (the lab's
network reaches every tenant's workers); `scrape` reads them from inside the container.

It also makes the stack's bare pods again when a restarted worker's kubelet refuses them at
admission (`readmit`): a Deployment brings its pods back, a bare pod would stay Failed.

Modules: `controller` (the loop), `lock` (releasing one pod, reading an allocation's outcome),
`readmit` (making a refused bare pod again), `pods` (which pods it keeps), `workqueue`, `metrics`,
`policy` (its RBAC and the admission policies narrowing its writes), `daemon` (the process: HTTP,
watchdog, token keeper, command line), `scrape` (reads its endpoints on loopback); its image's
`Dockerfile`. No Pulumi import:
the lab runs it in a container per tenant (`--kubeconfig` a file the stack uploads, its bound
token renewed with `--token-file`), and `python -m components.controllers.release` runs it anywhere else.
"""
