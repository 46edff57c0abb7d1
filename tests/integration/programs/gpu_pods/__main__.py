"""GPU Pods/Deployments from config `workloads` (list of {name, kind, replicas, tenant, limits}),
created with a provider for the cluster in the secret config `kubeconfig`."""

import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
provider = k8s.Provider("cluster", kubeconfig=config.require_secret("kubeconfig"))
opts = pulumi.ResourceOptions(provider=provider)
for w in config.require_object("workloads"):
    labels = {"app": w["name"], "gpu-tenancy/tenant": w["tenant"]}
    container = {"name": "main", "image": "busybox", "resources": {"limits": w["limits"]}}
    meta = {"name": w["name"], "labels": labels, "annotations": {"pulumi.com/skipAwait": "true"}}
    if w.get("kind", "Pod") == "Pod":
        k8s.core.v1.Pod(w["name"], metadata=meta, spec={"containers": [container]}, opts=opts)
    else:
        k8s.apps.v1.Deployment(
            w["name"],
            metadata=meta,
            spec={
                "replicas": w.get("replicas", 1),
                "selector": {"matchLabels": {"app": w["name"]}},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
            opts=opts,
        )
