"""GpuTenant: one team's whole GPU cluster: control plane, workers, CNI, HAMi, fake GPU fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import HamiConfig, TenantConfig
from components.config.names import worker_name
from components.tenant.control_plane import Tenant, TenantArgs
from components.tenant.gpu_inventory import MockGpuInventory, MockGpuInventoryArgs
from components.tenant.gpu_quota import GpuQuota, GpuQuotaArgs
from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs
from components.tenant.hami import Hami, HamiArgs
from components.tenant.lock_releaser import LockReleaser, LockReleaserArgs
from components.tenant.network import TenantNetwork, TenantNetworkArgs
from components.tenant.worker_node import NodeBootstrap, NodeBootstrapArgs, WorkerNode, WorkerNodeArgs, token_id


@dataclass
class GpuTenantArgs:
    tenant: TenantConfig
    hami: HamiConfig
    lab_name: str
    project: str
    stack: str
    management_provider: k8s.Provider
    address: str
    # The Docker network's name: the lab's own, or the platform's (team stacks).
    network: pulumi.Input[str]
    datastore: pulumi.Input[str]
    # The release controller's image (ReleaserImage.ref), built once per stack on the lab host.
    releaser_image: pulumi.Input[str]
    # Kamaji's release, when this stack installs it (the TCP goes after it, and before it on destroy).
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class GpuTenant(pulumi.ComponentResource):
    """Wires the per-tenant components in the order the design's graph gives.

    Tenant -> NodeBootstrap -> WorkerNode xN -> TenantNetwork (needs a worker's image) ->
    MockGpuInventory (needs the Node objects) -> Hami (needs Ready nodes; waits for its webhook
    and for the cards to be registered); LockReleaser beside them (needs only the tenant API);
    GpuQuota; then the workloads, once HAMi is ready and the releaser runs.
    """

    def __init__(self, name: str, args: GpuTenantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuTenant", name, None, opts)
        t = args.tenant
        child = pulumi.ResourceOptions(parent=self)
        self.control_plane = Tenant(
            f"{name}-cp",
            TenantArgs(
                tenant=t,
                management_provider=args.management_provider,
                address=args.address,
                datastore=args.datastore,
                project=args.project,
                stack=args.stack,
                depends_on=args.depends_on,
            ),
            opts=child,
        )
        provider = self.control_plane.provider
        self.bootstrap = NodeBootstrap(
            f"{name}-bootstrap",
            NodeBootstrapArgs(token_public=token_id(args.project, args.stack, t.name), provider=provider),
            opts=child,
        )
        self.workers = [
            WorkerNode(
                f"{name}-worker-{i}",
                WorkerNodeArgs(
                    node_name=worker_name(args.lab_name, t.name, i),
                    image=t.worker_image,
                    network=args.network,
                    endpoint=f"{args.address}:{t.api_port}",
                    bootstrap=self.bootstrap,
                    tenant_kubeconfig=self.control_plane.automation_kubeconfig,
                ),
                opts=child,
            )
            for i in range(t.workers)
        ]
        self.network = TenantNetwork(
            f"{name}-network",
            TenantNetworkArgs(container_name=self.workers[0].container.name, pod_cidr=t.pod_cidr, provider=provider),
            opts=child,
        )
        joins: list[pulumi.Resource] = [w.join for w in self.workers]
        self.inventory = MockGpuInventory(
            f"{name}-gpus",
            MockGpuInventoryArgs(
                tenant=t.name,
                fleet=t.gpu,
                nodes=[w.node_name for w in self.workers],
                provider=provider,
                kubeconfig=self.control_plane.automation_kubeconfig,
                depends_on=joins,
            ),
            opts=child,
        )
        self.hami = Hami(
            f"{name}-hami",
            HamiArgs(
                provider=provider,
                kubeconfig=self.control_plane.automation_kubeconfig,
                kubernetes_version=t.kubernetes_version,
                node_lock_timeout=args.hami.node_lock_timeout,
                expected_devices=self.inventory.devices,
                depends_on=[*joins, self.network, self.inventory],
            ),
            opts=child,
        )
        self.releaser = LockReleaser(
            f"{name}-releaser",
            LockReleaserArgs(
                tenant=t.name,
                lab_name=args.lab_name,
                network=args.network,
                image=args.releaser_image,
                server=f"https://{args.address}:{t.api_port}",
                provider=provider,
                admin_kubeconfig=self.control_plane.automation_kubeconfig,
            ),
            opts=child,
        )
        namespaces = {w.namespace for w in t.workloads} - {"default"}
        self.namespaces = [
            k8s.core.v1.Namespace(
                f"{name}-ns-{ns}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=ns),
                opts=pulumi.ResourceOptions(parent=self, provider=provider),
            )
            for ns in sorted(namespaces)
        ]
        self.quota = GpuQuota(
            f"{name}-quota",
            GpuQuotaArgs(
                quota=t.quota.quota,
                namespaces=["default", *sorted(namespaces)],
                provider=provider,
                depends_on=list(self.namespaces),
            ),
            opts=child,
        )
        self.workloads = [
            GpuWorkload(
                f"{name}-{w.namespace}-{w.name}",
                GpuWorkloadArgs(
                    tenant=t.name,
                    workload=w,
                    provider=provider,
                    kubeconfig=self.control_plane.automation_kubeconfig,
                    depends_on=[*self.hami.ready, self.releaser, self.quota],
                ),
                opts=child,
            )
            for w in t.workloads
        ]
        self.register_outputs(
            {
                "endpoint": self.control_plane.endpoint,
                "kubeconfig": self.control_plane.kubeconfig,
                "nodes": [w.node_name for w in self.workers],
                "inventory": self.inventory.summary,
                "releaser": self.releaser.metrics_url,
            }
        )
