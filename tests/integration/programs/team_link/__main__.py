"""Team-role test program: the project's PlatformLink (the platform's record read from the team's
namespace with the team's own grant, checked against the stack) and, on the management cluster it
yields, what a team stack makes there: its TenantControlPlane, with the spec the tenant component
builds (the DataStore and schema the platform named, its own ports). Kamaji itself does not run in
this cluster, so the TCP is created but never reconciled, and the program does not wait for it."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.domain.names import tenant_namespace
from components.platform.platform_link import PlatformLink, PlatformLinkArgs
from components.tenant.control_plane import TCP_API_VERSION, TCP_KIND, control_plane_spec

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {
        "role": "team",
        "cluster": config.require_object("cluster"),
        "tenants": config.require_object("tenants"),
        "managementServer": config.get("managementServer"),
        "managementCa": config.get("managementCa"),
    },
    management_token_given=config.get_secret("managementToken") is not None,
)
link = PlatformLink("platform", PlatformLinkArgs(config=cfg, token=config.require_secret("managementToken")))
for t in cfg.tenants:
    k8s.apiextensions.CustomResource(
        f"{t.name}-tcp",
        api_version=TCP_API_VERSION,
        kind=TCP_KIND,
        metadata={"name": t.name, "namespace": tenant_namespace(t.name)},
        spec=pulumi.Output.all(link.datastore(t.name), link.schema(t.name)).apply(
            lambda a, t=t: control_plane_spec(t, str(cfg.cluster.management_ip), a[0], a[1])
        ),
        opts=pulumi.ResourceOptions(provider=link.provider),
    )
pulumi.export("network", link.network)
