"""gpu-tenancy: reads the stack config and wires the platform's components."""

import pulumi

from components.config import MODE_KUBECONFIG, ConfigError, load_stack_config
from components.gpu_tenant import GpuTenant, GpuTenantArgs
from components.kamaji_platform import KamajiPlatform
from components.management_cluster import ManagementCluster, ManagementClusterArgs

project = pulumi.get_project()
stack = pulumi.get_stack()
config = pulumi.Config()
try:
    cfg = load_stack_config(
        project,
        {key: config.get_object(key) for key in ("cluster", "tenants", "hami")},
        kubeconfig_given=pulumi.runtime.get_config(f"{project}:kubeconfig") is not None,
    )
except ConfigError as exc:
    raise pulumi.RunError(str(exc)) from None

cluster = ManagementCluster(
    "management",
    ManagementClusterArgs(
        cluster=cfg.cluster,
        kubeconfig=config.require_secret("kubeconfig") if cfg.cluster.mode == MODE_KUBECONFIG else None,
    ),
)
platform = KamajiPlatform("kamaji", cluster.provider)

for t in cfg.tenants:
    tenant = GpuTenant(
        t.name,
        GpuTenantArgs(
            tenant=t,
            hami=cfg.hami,
            lab_name=cfg.cluster.name,
            project=project,
            stack=stack,
            management_provider=cluster.provider,
            address=cluster.address,
            network=cluster.network,
            datastore=platform.datastore_name,
            kamaji=platform.release,
        ),
    )
    pulumi.export(
        t.name,
        {
            "endpoint": tenant.control_plane.endpoint,
            "kubeconfig": tenant.control_plane.kubeconfig,
            "nodes": [w.node_name for w in tenant.workers],
            "gpuInventory": tenant.inventory.summary,
        },
    )
pulumi.export("managementKubeconfig", cluster.kubeconfig)
