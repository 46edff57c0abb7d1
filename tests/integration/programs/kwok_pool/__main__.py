"""Tenant-level test program: a kwok pool (the project's SimulatedNodes) and a GPU Deployment.

The tenant's kubeconfig comes in as the secret config key `kubeconfig`; KWOK runs beside the
test's API server. The Deployment is awaited by the provider, so `up` succeeds only once its
pods were scheduled onto the simulated nodes and KWOK made them Running.
"""

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import TenantConfig
from components.domain.hami_annotations import RES_GPUCORES, RES_GPUMEM
from components.providers.simulated_nodes import SimulatedNodes

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
tenant = TenantConfig.model_validate(
    {
        "name": config.require("tenant"),
        "pools": [{"name": "worker"}, {"name": "sim", "mode": "kwok", "nodes": config.require_int("nodes")}],
        "gpu": {"model": config.require("model"), "cardsPerNode": config.require_int("cardsPerNode")},
        "quota": {"gpus": 10**6, "gpumemMb": 10**9, "gpucoresPercent": 10**6},
    }
)
pool = tenant.pools_of("kwok")[0]
nodes = SimulatedNodes(
    f"{tenant.name}-{pool.name}",
    kubeconfig=kubeconfig,
    tenant=tenant.name,
    pool=pool.name,
    names=tenant.node_names("lab", pool),
    model=tenant.gpu.model.key,
    cards_per_node=tenant.gpu.cards_per_node,
)
provider = k8s.Provider("tenant", kubeconfig=kubeconfig)
labels = {"app": "gpu-slices"}
deployment = k8s.apps.v1.Deployment(
    "gpu-slices",
    metadata={"name": "gpu-slices", "namespace": "default"},
    spec={
        "replicas": config.require_int("replicas"),
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "docker.io/library/busybox:1.36",
                        "resources": {"limits": {RES_GPUMEM: "20000", RES_GPUCORES: "30"}},
                    }
                ]
            },
        },
    },
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[nodes]),
)
pulumi.export("nodes", nodes.names)
