"""GPU Pods/Deployments from config `workloads` (list of {name, kind, replicas, tenant, limits} or
{..., containers: [{name, limits}]}), created with a provider for the cluster in the secret
config `kubeconfig`; a workload without `tenant` carries no tenant label."""

import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
provider = k8s.Provider("cluster", kubeconfig=config.require_secret("kubeconfig"))
opts = pulumi.ResourceOptions(provider=provider)
for w in config.require_object("workloads"):
    labels = {"app": w["name"]}
    if "tenant" in w:
        labels["gpu-tenancy/tenant"] = w["tenant"]
    given = w.get("containers") or [{"name": "main", "limits": w["limits"]}]
    containers = [{"name": c["name"], "image": "busybox", "resources": {"limits": c["limits"]}} for c in given]
    meta = {"name": w["name"], "labels": labels, "annotations": {"pulumi.com/skipAwait": "true"}}
    if w.get("kind", "Pod") == "Pod":
        k8s.core.v1.Pod(w["name"], metadata=meta, spec={"containers": containers}, opts=opts)
    else:
        k8s.apps.v1.Deployment(
            w["name"],
            metadata=meta,
            spec={
                "replicas": w.get("replicas", 1),
                "selector": {"matchLabels": {"app": w["name"]}},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
            },
            opts=opts,
        )
