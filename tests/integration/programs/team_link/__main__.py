"""Team-role test program: the project's PlatformLink (StackReference, registry check, the team's
own token from secret config `managementToken`) and, on the management cluster it yields, what a
team stack makes there beside its TenantControlPlane: KWOK's Secret in the tenant's simulation
namespace (made by the platform). Tenants themselves need Kamaji, which this cluster does not run."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import load_stack_config
from components.config.names import simulation_namespace, simulation_secret
from components.platform.platform_link import PlatformLink, PlatformLinkArgs

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {
        "role": "team",
        "platformStack": config.require("platformStack"),
        "cluster": config.require_object("cluster"),
        "tenants": config.require_object("tenants"),
    },
    management_token_given=config.get_secret("managementToken") is not None,
)
link = PlatformLink("platform", PlatformLinkArgs(config=cfg, token=config.require_secret("managementToken")))
for t in cfg.tenants:
    k8s.core.v1.Secret(
        f"{t.name}-kwok",
        # No garbage collector runs in the test cluster to finish a foreground deletion.
        metadata={
            "name": simulation_secret(t.name),
            "namespace": simulation_namespace(t.name),
            "annotations": {"pulumi.com/deletionPropagationPolicy": "background"},
        },
        string_data={"network": link.network, "apiPort": str(t.api_port)},
        opts=pulumi.ResourceOptions(provider=link.provider),
    )
pulumi.export("network", link.network)
