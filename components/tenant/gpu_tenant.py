"""GpuTenant: one team's whole GPU cluster: control plane, workers, CNI, HAMi, fake GPU fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import HamiConfig, TenantConfig
from components.config.names import worker_name
from components.gpu.rules import Demand, total_usage
from components.ops.bootstrap import kubeconfig_ca_hash
from components.tenant.control_plane import Tenant, TenantArgs
from components.tenant.gpu_inventory import MockGpuInventory, MockGpuInventoryArgs
from components.tenant.gpu_quota import GpuQuota, GpuQuotaArgs
from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs
from components.tenant.hami import Hami, HamiArgs
from components.tenant.lock_releaser import LockReleaser, LockReleaserArgs
from components.tenant.network import TenantNetwork, TenantNetworkArgs
from components.tenant.worker_node import NodeBootstrap, NodeBootstrapArgs, WorkerNode, WorkerNodeArgs


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
    # Lifetime of each worker's bootstrap token (revoked as soon as its join is done).
    bootstrap_token_minutes: int
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
        self.bootstrap = NodeBootstrap(f"{name}-bootstrap", NodeBootstrapArgs(provider=provider), opts=child)
        ca_hash = self.control_plane.automation_kubeconfig.apply(kubeconfig_ca_hash)
        self.workers = [
            WorkerNode(
                f"{name}-worker-{i}",
                WorkerNodeArgs(
                    node_name=worker_name(args.lab_name, t.name, i),
                    image=t.worker_image,
                    network=args.network,
                    endpoint=f"{args.address}:{t.api_port}",
                    tenant_kubeconfig=self.control_plane.automation_kubeconfig,
                    ca_cert_hash=ca_hash,
                    token_ttl_seconds=args.bootstrap_token_minutes * 60,
                    depends_on=[self.bootstrap],
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
        joins: list[pulumi.Resource] = [w.membership for w in self.workers]
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
        declared: dict[str, list[Demand]] = {}
        for w in t.workloads:
            declared.setdefault(w.namespace, []).append(w.demand(t.gpu.model))
        self.quota = GpuQuota(
            f"{name}-quota",
            GpuQuotaArgs(
                budget=t.quota.quota,
                declared={ns: total_usage(ds) for ns, ds in declared.items()},
                tenant=t.name,
                provider=provider,
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
