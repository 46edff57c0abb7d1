"""Tenant-level test program: the project's MockGpuInventory against an adopted cluster.

The cluster's kubeconfig comes in as the secret config key `kubeconfig`, as for an adopted
management cluster; the nodes already exist (created by the test, as kubelets would).
"""

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import GpuFleet
from components.domain.rules import Fleet
from components.tenant.gpu_inventory import MockGpuInventory, MockGpuInventoryArgs, inventory_summary

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
provider = k8s.Provider("adopted", kubeconfig=kubeconfig)
fleet = GpuFleet.model_validate({"model": config.require("model"), "cardsPerNode": config.require_int("cardsPerNode")})
inventory = MockGpuInventory(
    "gpus",
    MockGpuInventoryArgs(
        tenant=config.require("tenant"),
        fleet=fleet,
        nodes=config.require_object("nodes"),
        kubeconfig=kubeconfig,
    ),
    opts=pulumi.ResourceOptions(provider=provider),
)
nodes = len(config.require_object("nodes"))
pulumi.export("inventory", inventory_summary(Fleet.of(fleet.model, nodes, fleet.cards_per_node, "inv")))
