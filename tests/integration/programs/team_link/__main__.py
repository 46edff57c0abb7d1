"""Team-role test program: the project's PlatformLink (StackReference + registry check) and, on
the management cluster it yields, one object per tenant in its namespace `tenant-<name>` (made by
the test). Tenants themselves need Kamaji, which this cluster does not run."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import load_stack_config
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
)
link = PlatformLink("platform", PlatformLinkArgs(config=cfg))
for t in cfg.tenants:
    k8s.core.v1.ConfigMap(
        f"{t.name}-link",
        # No garbage collector runs in the test cluster to finish a foreground deletion.
        metadata={
            "name": "platform-link",
            "namespace": f"tenant-{t.name}",
            "annotations": {"pulumi.com/deletionPropagationPolicy": "background"},
        },
        data={"network": link.network, "apiPort": str(t.api_port)},
        opts=pulumi.ResourceOptions(provider=link.provider),
    )
pulumi.export("network", link.network)
