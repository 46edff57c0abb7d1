"""gpu-tenancy: reads the stack config and wires the platform's components.

Roles (config `role`): `lab` builds everything; `platform` the management cluster and Kamaji,
with each registered team's access and record; `team` one team's tenant on the platform it reads
from the management cluster with the team's own token.
"""

from functools import partial

import pulumi

from components.config.image_set import mirror_registries
from components.config.load import OBJECT_KEYS, load_config
from components.config.model import MANAGEMENT_TOKEN_KEY, MODE_KUBECONFIG, ROLE_LAB, ROLE_PLATFORM, ROLE_TEAM
from components.config.problems import ConfigError
from components.platform.kamaji import KamajiPlatform, KamajiPlatformArgs
from components.platform.management_cluster import ManagementCluster, ManagementClusterArgs
from components.platform.platform_link import PlatformLink, PlatformLinkArgs
from components.platform.release_controller_image import ReleaseControllerImage, ReleaseControllerImageArgs
from components.platform.teams import register_teams
from components.tenant.gpu_tenant import GpuTenant, GpuTenantArgs

project = pulumi.get_project()
stack = pulumi.get_stack()
config = pulumi.Config()
try:
    cfg = load_config(
        project,
        lambda key: config.get_object(key) if key in OBJECT_KEYS else pulumi.runtime.get_config(f"{project}:{key}"),
    )
except ConfigError as exc:
    raise pulumi.RunError(str(exc)) from None
for warning in cfg.warnings:
    pulumi.log.warn(f"{project}:{warning}")

if cfg.role == ROLE_TEAM:
    link = PlatformLink("platform", PlatformLinkArgs(config=cfg, token=config.require_secret(MANAGEMENT_TOKEN_KEY)))
    management_provider, network, kamaji = link.provider, link.network, None
    datastore_of, schema_of = link.datastore, link.schema  # what the platform named for the team
else:
    cluster = ManagementCluster(
        "management",
        ManagementClusterArgs(
            cluster=cfg.cluster,
            kubeconfig=config.require_secret("kubeconfig") if cfg.cluster.mode == MODE_KUBECONFIG else None,
            node_image=cfg.images.management,
            k3s_image=cfg.images.k3s,
            mirror=cfg.mirror,
            mirror_registries=mirror_registries(cfg),
        ),
    )
    platform = KamajiPlatform(
        "kamaji",
        KamajiPlatformArgs(
            kubeconfig=cluster.kubeconfig,
            cert_manager_chart=cfg.chart("certManager"),
            kamaji_chart=cfg.chart("kamaji"),
            shared_datastore=cfg.role == ROLE_LAB,
        ),
        opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=cluster.ready),
    )
    management_provider, network, kamaji = cluster.provider, cluster.network.name, platform.datastore
    datastore_of, schema_of = (lambda _tenant: platform.datastore_name), partial(cfg.datastore_schema, stack)
    if cfg.role == ROLE_LAB:  # one person's whole lab; a platform exports no credential
        pulumi.export("managementKubeconfig", cluster.kubeconfig)
    if cfg.role == ROLE_PLATFORM:  # per team: its own etcd and DataStore, access and record
        register_teams(
            cfg,
            network,
            cluster.kubeconfig,
            cfg.chart("kamajiEtcd"),
            pulumi.ResourceOptions(provider=cluster.provider, depends_on=[platform.release]),
        )

release_controller_image = (
    ReleaseControllerImage(
        "releaser",
        ReleaseControllerImageArgs(
            base_image=cfg.images.releaser_base,
            python_index=cfg.images.python_index,
            python_index_ca=cfg.images.python_index_ca_cert,
        ),
    )
    if any(t.runs_controllers for t in cfg.tenants)
    else None
)
for t in cfg.tenants:
    tenant = GpuTenant(
        t.name,
        GpuTenantArgs(
            tenant=t,
            hami=cfg.hami,
            lab_name=cfg.cluster.name,
            datastore_schema=schema_of(t.name),
            address=cfg.cluster.management_ip,
            network=network,
            datastore=datastore_of(t.name),
            bootstrap_token_minutes=cfg.cluster.bootstrap_token_minutes,
            release_controller_image=release_controller_image.ref if release_controller_image else "",
            owns_namespaces=cfg.role != ROLE_TEAM,
            node_image=cfg.cluster.node_image,
            images=cfg.images,
            mirror=cfg.mirror,
            mirror_registries=mirror_registries(cfg),
            hami_chart=cfg.chart("hami"),
        ),
        # On the management cluster, after Kamaji's DataStore (this stack's, or none: the platform's).
        opts=pulumi.ResourceOptions(provider=management_provider, depends_on=[kamaji] if kamaji else None),
    )
    pulumi.export(
        t.name,
        {
            "endpoint": tenant.control_plane.endpoint,
            "kubeconfig": tenant.control_plane.kubeconfig,
            "pools": tenant.pools,
            "gpuInventory": tenant.summary,
            "releaseController": (
                {"container": releases.container.name, "metrics": releases.metrics_url}
                if (releases := tenant.release_controller)
                else None
            ),
        },
    )
