"""GpuTenant: one team's whole GPU cluster: control plane, workers, CNI, HAMi, fake GPU fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.config.chart_sources import ChartSource
from components.config.model import (
    DEFAULT_JOIN_TOKEN_HOURS,
    POOL_DOCKER,
    POOL_EXTERNAL,
    POOL_KWOK,
    HamiConfig,
    ImagesConfig,
    MirrorConfig,
    TenantConfig,
)
from components.domain.inventory import node_devices
from components.domain.names import pool_labels, workload_resource
from components.domain.requests import Demand, total_usage
from components.lifecycle.bootstrap_token import kubeconfig_ca_hash
from components.nodes.registry_mirror import CONTAINERD, mirror_files
from components.providers.node_handover import NodeSettled
from components.providers.simulated_nodes import SimulatedNodes
from components.tenant.control_plane import ControlPlane, ControlPlaneArgs
from components.tenant.external_pool import ExternalPool, ExternalPoolArgs
from components.tenant.gpu_inventory import MockGpuInventory, MockGpuInventoryArgs, inventory_summary
from components.tenant.gpu_quota import GpuQuota, GpuQuotaArgs
from components.tenant.gpu_workload import GpuWorkload, GpuWorkloadArgs
from components.tenant.hami import Hami, HamiArgs
from components.tenant.kube_proxy import TenantKubeProxy, TenantKubeProxyArgs
from components.tenant.kwok_controller import KwokController, KwokControllerArgs
from components.tenant.network import TenantNetwork, TenantNetworkArgs
from components.tenant.release_controller import ReleaseController, ReleaseControllerArgs
from components.tenant.worker_node import NodeBootstrap, NodeBootstrapArgs, WorkerNode, WorkerNodeArgs


@dataclass
class GpuTenantArgs:
    tenant: TenantConfig
    hami: HamiConfig
    lab_name: str
    # The control plane's etcd keys (StackConfig.datastore_schema).
    datastore_schema: pulumi.Input[str]
    management_provider: k8s.Provider
    address: str
    # The Docker network's name: the lab's own, or the platform's (team stacks).
    network: pulumi.Input[str]
    datastore: pulumi.Input[str]
    # Lifetime of each worker's bootstrap token (revoked as soon as its join is done).
    bootstrap_token_minutes: int
    # The release controller's image (ReleaseControllerImage.ref), built once per stack on the lab host.
    release_controller_image: pulumi.Input[str]
    # Kamaji's release, when this stack installs it (the TCP goes after it, and before it on destroy).
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # False in a team stack: the platform made the tenant's namespaces (TeamAccess).
    owns_namespaces: bool = True
    # The cluster's `nodeImage` (a repository of the lab's node images), or None for kind's.
    node_image: str | None = None
    # The Docker engine's images (`images`: node images per version, KWOK's).
    images: ImagesConfig = field(default_factory=ImagesConfig)
    # The registry mirror the docker workers pull through (config `mirror`), for these registries.
    mirror: MirrorConfig | None = None
    mirror_registries: tuple[str, ...] = ()
    # Where HAMi's chart comes from (config `charts.hami`); None: its repository.
    hami_chart: ChartSource | None = None


class GpuTenant(pulumi.ComponentResource):
    """Wires the per-tenant components in the order the design's graph gives.

    ControlPlane (waited until it runs the tenant's version) -> NodeBootstrap, TenantKubeProxy ->
    docker workers
    one at a time (each: NodeDrain, container, join, its fake cards, NodeSettled; so an upgrade
    replaces them one by one, each settled before the next is drained), SimulatedNodes + one
    KwokController (kwok), ExternalPool (a join for the team's machines) -> TenantNetwork (needs
    a worker's image) -> Hami after the last worker settled (needs Ready nodes; waits for its
    webhook and for every fake card to be registered; in an upgrade its kube-scheduler follows
    the workers); ReleaseController beside them (fake cards only); GpuQuota; then the workloads,
    once HAMi is ready and the release controller runs.
    """

    def __init__(self, name: str, args: GpuTenantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuTenant", name, None, opts)
        t = args.tenant
        child = pulumi.ResourceOptions(parent=self)
        self.control_plane = ControlPlane(
            f"{name}-cp",
            ControlPlaneArgs(
                tenant=t,
                management_provider=args.management_provider,
                address=args.address,
                datastore=args.datastore,
                schema=args.datastore_schema,
                depends_on=args.depends_on,
                owns_namespaces=args.owns_namespaces,
            ),
            opts=child,
        )
        provider = self.control_plane.provider
        admin = self.control_plane.automation_kubeconfig
        endpoint = f"{args.address}:{t.api_port}"
        self.bootstrap = NodeBootstrap(f"{name}-bootstrap", NodeBootstrapArgs(provider=provider), opts=child)
        # Before any node: Services route from a node's first pod on (HAMi's reach the API server).
        self.kube_proxy = TenantKubeProxy(
            f"{name}-kube-proxy",
            TenantKubeProxyArgs(
                kubernetes_version=t.kubernetes_version,
                pod_cidr=t.pod_cidr,
                server=f"https://{endpoint}",
                provider=provider,
            ),
            opts=child,
        )
        ca_hash = admin.apply(kubeconfig_ca_hash)
        # Each node with fake cards, and its pool's cards (a mixed fleet: several models).
        fake_nodes = dict(t.gpu_nodes(args.lab_name))
        # Docker workers' fake cards, written node by node as each worker joins.
        self.inventory = MockGpuInventory(
            f"{name}-gpus",
            MockGpuInventoryArgs(tenant=t.name, fleet=t.gpu, nodes=[], provider=provider, kubeconfig=admin),
            opts=child,
        )
        # Docker workers: real containers, where the tenant's system pods run. One at a time: each
        # starts (or, in an upgrade, is drained and replaced) after the control plane is at the
        # tenant's version and the previous worker has settled with its pods placed again.
        self.workers: list[WorkerNode] = []
        self.settled: list[NodeSettled] = []
        after: list[pulumi.Resource] = [self.control_plane.control_plane]
        node_files = mirror_files(args.mirror, args.mirror_registries, CONTAINERD)
        for pool in t.pools_of(POOL_DOCKER):
            for i, node in enumerate(t.node_names(args.lab_name, pool)):
                worker = WorkerNode(
                    f"{name}-{pool.name}-{i}",
                    WorkerNodeArgs(
                        node_name=node,
                        image=t.worker_image(args.node_image, args.images.nodes),
                        network=args.network,
                        endpoint=endpoint,
                        tenant_kubeconfig=admin,
                        ca_cert_hash=ca_hash,
                        token_ttl_seconds=args.bootstrap_token_minutes * 60,
                        provider=provider,
                        labels=pool_labels(t.name, pool.name, POOL_DOCKER),
                        files=node_files,
                        depends_on=[self.bootstrap],
                        after=after,
                    ),
                    opts=child,
                )
                joined: list[pulumi.Resource] = [worker.membership, worker.labels]
                placed = list(joined)
                if node in fake_nodes:
                    placed.append(
                        self.inventory.add(node, worker.machine_id, depends_on=joined, fleet=fake_nodes[node])
                    )
                settled = NodeSettled(
                    f"{name}-{pool.name}-{i}-settled",
                    kubeconfig=admin,
                    node=node,
                    machine_id=worker.machine_id,
                    moved=worker.drain.moved,
                    opts=pulumi.ResourceOptions(parent=worker, depends_on=placed),
                )
                self.workers.append(worker)
                self.settled.append(settled)
                after = [settled]
        self.inventory.close()
        # kind's node images carry kindnet's manifest, applied here; the lab's node images bring
        # their own pod network (a bridge on each Node's pod CIDR and routes between the nodes).
        self.network = (
            TenantNetwork(
                f"{name}-network",
                TenantNetworkArgs(
                    container_name=self.workers[0].container.name, pod_cidr=t.pod_cidr, provider=provider
                ),
                opts=child,
            )
            if args.node_image is None
            else None
        )
        # kwok pools: simulated nodes with the same fake cards, kept Ready by one KWOK per tenant.
        self.kwok = (
            KwokController(
                f"{name}-kwok",
                KwokControllerArgs(
                    tenant=t.name,
                    lab_name=args.lab_name,
                    network=args.network,
                    keeper_image=args.release_controller_image,
                    image=args.images.kwok,
                    server=f"https://{endpoint}",
                    pod_cidr=t.pod_cidr,
                    tenant_provider=provider,
                    admin_kubeconfig=admin,
                ),
                opts=child,
            )
            if t.pools_of(POOL_KWOK)
            else None
        )
        self.simulated = [
            SimulatedNodes(
                f"{name}-{pool.name}",
                kubeconfig=admin,
                tenant=t.name,
                pool=pool.name,
                names=t.node_names(args.lab_name, pool),
                model=t.pool_gpu(pool).model.key,
                cards_per_node=t.pool_gpu(pool).cards_per_node,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.bootstrap]),
            )
            for pool in t.pools_of(POOL_KWOK)
        ]
        # external pools: the team's machines, joined with the configuration the stack outputs.
        self.external = [
            ExternalPool(
                f"{name}-{pool.name}",
                ExternalPoolArgs(
                    tenant=t.name,
                    pool=pool.name,
                    endpoint=endpoint,
                    admin_kubeconfig=admin,
                    ca_cert_hash=ca_hash,
                    token_ttl_seconds=(pool.join_token_hours or DEFAULT_JOIN_TOKEN_HOURS) * 3600,
                    machines=pool.nodes,
                    depends_on=[self.bootstrap],
                ),
                opts=child,
            )
            for pool in t.pools_of(POOL_EXTERNAL)
        ]
        self.summary = inventory_summary(t.fleet)
        self.hami = Hami(
            f"{name}-hami",
            HamiArgs(
                provider=provider,
                kubeconfig=admin,
                kubernetes_version=t.kubernetes_version,
                hami=args.hami,
                real_gpus=t.real_gpus,
                expected_devices={n: [d.id for d in node_devices(t.name, n, g)] for n, g in fake_nodes.items()},
                # After the last worker settled: in an upgrade, HAMi's kube-scheduler follows the workers.
                depends_on=[
                    *self.settled,
                    self.kube_proxy,
                    *([self.network] if self.network else []),
                    self.inventory,
                    *self.simulated,
                    *([self.kwok] if self.kwok else []),
                ],
                hami_chart=args.hami_chart,
            ),
            opts=child,
        )
        # The release controller: only where HAMi's allocations are never completed by a real plugin.
        self.release_controller = (
            None
            if t.real_gpus
            else ReleaseController(
                f"{name}-releaser",
                ReleaseControllerArgs(
                    tenant=t.name,
                    lab_name=args.lab_name,
                    network=args.network,
                    image=args.release_controller_image,
                    server=f"https://{endpoint}",
                    provider=provider,
                    admin_kubeconfig=admin,
                    readmit=tuple(f"{w.namespace}/{w.name}" for w in t.workloads if w.kind == "Pod"),
                ),
                opts=child,
            )
        )
        # Per pool: its mode and its nodes (external: the join, a secret).
        self.pools: dict[str, object] = {
            pool.name: {"mode": pool.mode, "nodes": t.node_names(args.lab_name, pool)} for pool in t.pools
        }
        for pool, ext in zip(t.pools_of(POOL_EXTERNAL), self.external, strict=True):
            self.pools[pool.name] = {"mode": pool.mode, "machines": pool.nodes, "join": ext.join}
        declared: dict[str, list[Demand]] = {}
        for w, d in zip(t.workloads, t.demands(), strict=True):
            declared.setdefault(w.namespace, []).append(d)
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
                workload_resource(name, w.namespace, w.name),
                GpuWorkloadArgs(
                    tenant=t.name,
                    workload=w,
                    kubernetes_version=t.kubernetes_version,
                    provider=provider,
                    kubeconfig=admin,
                    depends_on=[*self.hami.ready, *filter(None, [self.release_controller]), self.quota],
                ),
                opts=child,
            )
            for w in t.workloads
        ]
        self.register_outputs(
            {
                "endpoint": self.control_plane.endpoint,
                "kubeconfig": self.control_plane.kubeconfig,
                "pools": self.pools,
                "inventory": self.summary,
                "releaseController": self.release_controller.metrics_url if self.release_controller else None,
            }
        )
