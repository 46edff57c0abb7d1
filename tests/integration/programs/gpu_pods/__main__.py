"""GPU objects from config `workloads` (list of {name, kind, replicas, tenant, via, limits,
containers: [{name, limits}], spec: {...extra spec}, annotations, podAnnotations (a template's)}),
each created through the
provider of tenant `via` (default: its `tenant`, else the first) from the secret config
`kubeconfig-<tenant>` for every tenant in `clusters`; a workload without `tenant` carries no
tenant label. Kinds: Pod, Deployment, ReplicationController, StatefulSet, DaemonSet, Job,
CronJob, PyTorchJob (a CustomResource), HelmRelease (the local chart in `chart`, values given
by `values`)."""

import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
clusters = config.require_object("clusters")
providers = {c: k8s.Provider(f"cluster-{c}", kubeconfig=config.require_secret(f"kubeconfig-{c}")) for c in clusters}
TEMPLATED = {
    "Deployment": k8s.apps.v1.Deployment,
    "ReplicationController": k8s.core.v1.ReplicationController,
    "StatefulSet": k8s.apps.v1.StatefulSet,
    "DaemonSet": k8s.apps.v1.DaemonSet,
}
for w in config.require_object("workloads"):
    via = w.get("via") or w.get("tenant")
    opts = pulumi.ResourceOptions(provider=providers.get(via, providers[clusters[0]]))
    labels = {"app": w["name"]}
    if "tenant" in w:
        labels["gpu-tenancy/tenant"] = w["tenant"]
    given = w.get("containers") or [{"name": "main", "limits": w.get("limits", {})}]
    containers = [{"name": c["name"], "image": "busybox", "resources": {"limits": c["limits"]}} for c in given]
    meta = {
        "name": w["name"],
        "labels": labels,
        "annotations": {"pulumi.com/skipAwait": "true", **w.get("annotations", {})},
    }
    pod = {"containers": containers, **({"restartPolicy": "Never"} if w.get("kind") in ("Job", "CronJob") else {})}
    template = {"metadata": {"labels": labels, "annotations": w.get("podAnnotations", {})}, "spec": pod}
    kind = w.get("kind", "Pod")
    if kind == "Pod":
        k8s.core.v1.Pod(w["name"], metadata=meta, spec=pod, opts=opts)
    elif kind in TEMPLATED:
        spec = {"selector": {"matchLabels": {"app": w["name"]}}, "template": template, **w.get("spec", {})}
        if kind == "ReplicationController":
            spec["selector"] = {"app": w["name"]}
        if kind != "DaemonSet":
            spec["replicas"] = w.get("replicas", 1)
        if kind == "StatefulSet":
            spec["serviceName"] = w["name"]
        TEMPLATED[kind](w["name"], metadata=meta, spec=spec, opts=opts)
    elif kind == "Job":
        spec = {"parallelism": w.get("replicas", 1), "template": template, **w.get("spec", {})}
        k8s.batch.v1.Job(w["name"], metadata=meta, spec=spec, opts=opts)
    elif kind == "CronJob":
        job = {"parallelism": w.get("replicas", 1), "template": template}
        spec = {"schedule": "0 * * * *", "jobTemplate": {"spec": job}, **w.get("spec", {})}
        k8s.batch.v1.CronJob(w["name"], metadata=meta, spec=spec, opts=opts)
    elif kind == "PyTorchJob":
        replica = {"replicas": w.get("replicas", 1), "template": template}
        k8s.apiextensions.CustomResource(
            w["name"],
            api_version="kubeflow.org/v1",
            kind="PyTorchJob",
            metadata=meta,
            spec={"pytorchReplicaSpecs": {"Worker": replica}},
            opts=opts,
        )
    elif kind == "HelmRelease":
        k8s.helm.v3.Release(w["name"], chart=config.require("chart"), values=w.get("values", {}), opts=opts)
    else:
        raise ValueError(f"unknown kind {kind}")
