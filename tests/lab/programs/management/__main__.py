"""The stack's ManagementCluster as `__main__.py` wires it, from the same config keys (`cluster`,
`mirror`, `images`), without Kamaji's charts: their images come only from fetched repositories."""

import pulumi

from components.config.image_set import mirror_registries
from components.config.load import load_stack_config
from components.platform.management_cluster import ManagementCluster, ManagementClusterArgs

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {
        "role": "platform",
        "cluster": config.require_object("cluster"),
        "mirror": config.require_object("mirror"),
        "images": config.get_object("images"),
        "teams": [],
    },
)
cluster = ManagementCluster(
    "management",
    ManagementClusterArgs(
        cluster=cfg.cluster,
        node_image=cfg.images.management,
        mirror=cfg.mirror,
        mirror_registries=mirror_registries(cfg),
    ),
)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("network", cluster.network.name)
