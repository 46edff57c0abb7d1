"""TenantNetwork: the CNI of one tenant. Kamaji installs none, and nodes stay NotReady without one.

kindnet, exactly as the worker image ships it (/kind/manifests/default-cni.yaml), rendered with
the tenant's pod CIDR, so the CNI always matches the node image's release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

CNI_TEMPLATE_PATH = "/kind/manifests/default-cni.yaml"
_PLACEHOLDER = re.compile(r"\{\{\s*\.PodSubnet\s*\}\}")
_ANY_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


def render_kindnet(template: str, pod_cidr: str) -> str:
    """Fill kind's CNI template; any placeholder we do not know is an error, not a silent gap."""
    rendered = _PLACEHOLDER.sub(pod_cidr, template)
    left = _ANY_PLACEHOLDER.findall(rendered)
    if left:
        raise ValueError(f"{CNI_TEMPLATE_PATH} has placeholders this program does not fill: {sorted(set(left))}")
    return rendered


@dataclass
class TenantNetworkArgs:
    # A worker container whose image ships the CNI template.
    container_name: pulumi.Input[str]
    pod_cidr: str


class TenantNetwork(pulumi.ComponentResource):
    """Reads the CNI template from a worker container and applies it in the tenant (option
    `provider`: the tenant's)."""

    def __init__(self, name: str, args: TenantNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:TenantNetwork", name, None, opts)
        container_name, pod_cidr = args.container_name, args.pod_cidr
        template = command.local.Command(
            f"{name}-cni-template",
            create=f'docker exec "$NODE" cat {CNI_TEMPLATE_PATH}',
            environment={"NODE": container_name},
            triggers=[container_name],
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cni = k8s.yaml.v2.ConfigGroup(
            f"{name}-kindnet",
            yaml=template.stdout.apply(lambda t: render_kindnet(t, pod_cidr)),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
