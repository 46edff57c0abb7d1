"""GpuTenant: one team's whole GPU cluster: control plane, workers, CNI, HAMi, fake GPU fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.config.chart_sources import ChartSource
from components.config.model import (
    DEFAULT_JOIN_TOKEN_HOURS,
    POOL_DOCKER,
    POOL_EXTERNAL,
    POOL_KWOK,
    GpuFleet,
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
from components.platform.component_options import waits_for
from components.providers.machines_joined import MachinesJoined
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
from components.tenant.worker_node import NodeBootstrap, WorkerNode, WorkerNodeArgs


@dataclass
class GpuTenantArgs:
    tenant: TenantConfig
    hami: HamiConfig
    lab_name: str
    # The control plane's etcd keys (StackConfig.datastore_schema).
    datastore_schema: pulumi.Input[str]
    address: str
    # The Docker network's name: the lab's own, or the platform's (team stacks).
    network: pulumi.Input[str]
    datastore: pulumi.Input[str]
    # Lifetime of each worker's bootstrap token (revoked as soon as its join is done).
    bootstrap_token_minutes: int
    # The release controller's image (ReleaseControllerImage.ref), built once per stack on the lab host.
    release_controller_image: pulumi.Input[str]
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
    """One team's GPU cluster, wired in the order the design's graph gives, top to bottom:

    ControlPlane (on the management cluster: this component's `provider`; after its `depends_on`,
    Kamaji's DataStore) -> on the tenant, through its automation identity: NodeBootstrap,
    TenantKubeProxy -> docker workers one at a time (each: NodeDrain, container, join, its fake
    cards, NodeSettled; so an upgrade replaces them one by one, each settled before the next is
    drained), SimulatedNodes + one KwokController (kwok), ExternalPool (a join for the team's
    machines; in a tenant of those only, MachinesJoined: one of them Ready) -> TenantNetwork
    (needs a worker's image) -> Hami after the last worker settled (needs Ready nodes; waits for
    its webhook and for every fake card to be registered; in an upgrade its kube-scheduler follows
    the workers); ReleaseController beside them (fake cards only); GpuQuota; then the workloads,
    once HAMi is ready and the release controller runs.
    """

    def __init__(self, name: str, args: GpuTenantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:GpuTenant", name, None, opts)
        t = args.tenant
        self.control_plane = self._control_plane(name, args, waits_for(opts))
        on_tenant = pulumi.ResourceOptions(parent=self, provider=self.control_plane.provider)
        admin = self.control_plane.automation_kubeconfig
        endpoint = f"{args.address}:{t.api_port}"
        ca_hash = admin.apply(kubeconfig_ca_hash)
        # Each node with fake cards, and its pool's cards (a mixed fleet: several models).
        fake_nodes = dict(t.gpu_nodes(args.lab_name))

        self.bootstrap = NodeBootstrap(f"{name}-bootstrap", opts=on_tenant)
        # Before any node: Services route from a node's first pod on (HAMi's reach the API server).
        self.kube_proxy = TenantKubeProxy(
            f"{name}-kube-proxy",
            TenantKubeProxyArgs(
                kubernetes_version=t.kubernetes_version, pod_cidr=t.pod_cidr, server=f"https://{endpoint}"
            ),
            opts=on_tenant,
        )
        # Docker workers' fake cards, written node by node as each worker joins.
        self.inventory = MockGpuInventory(
            f"{name}-gpus", MockGpuInventoryArgs(tenant=t.name, fleet=t.gpu, nodes=[], kubeconfig=admin), opts=on_tenant
        )
        self.workers, self.settled = self._docker_workers(name, args, on_tenant, endpoint, ca_hash, fake_nodes)
        self.inventory.close()
        self.network = self._pod_network(name, args, on_tenant)
        self.kwok, self.simulated = self._kwok_pools(name, args, on_tenant, endpoint)
        self.external = self._external_pools(name, args, on_tenant, endpoint, ca_hash)
        self.machines = self._machines(name, args, on_tenant)
        self.summary = inventory_summary(t.fleet)

        # After the last worker settled: in an upgrade, HAMi's kube-scheduler follows the workers.
        nodes_ready: list[pulumi.Resource] = [
            *self.settled,
            self.kube_proxy,
            *filter(None, [self.network]),
            self.inventory,
            *self.simulated,
            *filter(None, [self.kwok, self.machines]),
        ]
        self.hami = Hami(
            f"{name}-hami",
            HamiArgs(
                kubeconfig=admin,
                kubernetes_version=t.kubernetes_version,
                hami=args.hami,
                real_gpus=t.real_gpus,
                system_pool_mode=t.system_pool_mode,
                expected_devices={n: [d.id for d in node_devices(t.name, n, g)] for n, g in fake_nodes.items()},
                hami_chart=args.hami_chart,
            ),
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=nodes_ready)),
        )
        self.release_controller = self._release_controller(name, args, on_tenant, endpoint)
        self.pools = self._pools(args)
        self.quota = self._quota(name, args, on_tenant)
        gpu_ready: list[pulumi.Resource] = [*self.hami.ready, *filter(None, [self.release_controller]), self.quota]
        self.workloads = [
            GpuWorkload(
                workload_resource(name, w.namespace, w.name),
                GpuWorkloadArgs(tenant=t.name, workload=w, kubernetes_version=t.kubernetes_version, kubeconfig=admin),
                opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=gpu_ready)),
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

    def _control_plane(self, name: str, args: GpuTenantArgs, after: list[pulumi.Resource]) -> ControlPlane:
        """On the management cluster (this component's provider), after Kamaji's DataStore."""
        return ControlPlane(
            f"{name}-cp",
            ControlPlaneArgs(
                tenant=args.tenant,
                address=args.address,
                datastore=args.datastore,
                schema=args.datastore_schema,
                owns_namespaces=args.owns_namespaces,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )

    def _docker_workers(
        self,
        name: str,
        args: GpuTenantArgs,
        on_tenant: pulumi.ResourceOptions,
        endpoint: str,
        ca_hash: pulumi.Output[str],
        fake_nodes: dict[str, GpuFleet],
    ) -> tuple[list[WorkerNode], list[NodeSettled]]:
        """Real containers, where the tenant's system pods run. One at a time: each starts (or, in
        an upgrade, is drained and replaced) after the control plane is at the tenant's version
        and the previous worker has settled with its pods placed again."""
        t = args.tenant
        admin = self.control_plane.automation_kubeconfig
        workers: list[WorkerNode] = []
        settled: list[NodeSettled] = []
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
                        labels=pool_labels(t.name, pool.name, POOL_DOCKER),
                        files=node_files,
                        after=after,
                    ),
                    opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[self.bootstrap])),
                )
                joined: list[pulumi.Resource] = [worker.membership, worker.labels]
                placed = list(joined)
                if node in fake_nodes:
                    placed.append(
                        self.inventory.add(node, worker.machine_id, depends_on=joined, fleet=fake_nodes[node])
                    )
                node_settled = NodeSettled(
                    f"{name}-{pool.name}-{i}-settled",
                    kubeconfig=admin,
                    node=node,
                    machine_id=worker.machine_id,
                    moved=worker.drain.moved,
                    opts=pulumi.ResourceOptions(parent=worker, depends_on=placed),
                )
                workers.append(worker)
                settled.append(node_settled)
                after = [node_settled]
        return workers, settled

    def _pod_network(self, name: str, args: GpuTenantArgs, on_tenant: pulumi.ResourceOptions) -> TenantNetwork | None:
        """kind's node images carry kindnet's manifest, applied here; the lab's node images bring
        their own pod network (a bridge on each Node's pod CIDR and routes between the nodes), and so
        do the team's own machines in a tenant of external pools only (there is no worker to render
        kindnet's manifest from)."""
        if args.node_image is not None or not self.workers:
            return None
        return TenantNetwork(
            f"{name}-network",
            TenantNetworkArgs(container_name=self.workers[0].container.name, pod_cidr=args.tenant.pod_cidr),
            opts=on_tenant,
        )

    def _kwok_pools(
        self, name: str, args: GpuTenantArgs, on_tenant: pulumi.ResourceOptions, endpoint: str
    ) -> tuple[KwokController | None, list[SimulatedNodes]]:
        """kwok pools: simulated nodes with the same fake cards, kept Ready by one KWOK per tenant."""
        t = args.tenant
        if not t.pools_of(POOL_KWOK):
            return None, []
        admin = self.control_plane.automation_kubeconfig
        kwok = KwokController(
            f"{name}-kwok",
            KwokControllerArgs(
                tenant=t.name,
                lab_name=args.lab_name,
                network=args.network,
                keeper_image=args.release_controller_image,
                image=args.images.kwok,
                server=f"https://{endpoint}",
                pod_cidr=t.pod_cidr,
                admin_kubeconfig=admin,
            ),
            opts=on_tenant,
        )
        simulated = [
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
        return kwok, simulated

    def _external_pools(
        self,
        name: str,
        args: GpuTenantArgs,
        on_tenant: pulumi.ResourceOptions,
        endpoint: str,
        ca_hash: pulumi.Output[str],
    ) -> list[ExternalPool]:
        """external pools: the team's machines, joined with the configuration the stack outputs."""
        t = args.tenant
        return [
            ExternalPool(
                f"{name}-{pool.name}",
                ExternalPoolArgs(
                    tenant=t.name,
                    pool=pool.name,
                    endpoint=endpoint,
                    admin_kubeconfig=self.control_plane.automation_kubeconfig,
                    ca_cert_hash=ca_hash,
                    token_ttl_seconds=(pool.join_token_hours or DEFAULT_JOIN_TOKEN_HOURS) * 3600,
                    machines=pool.nodes,
                ),
                opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[self.bootstrap])),
            )
            for pool in t.pools_of(POOL_EXTERNAL)
        ]

    def _machines(self, name: str, args: GpuTenantArgs, on_tenant: pulumi.ResourceOptions) -> MachinesJoined | None:
        """A tenant of the team's own machines only: HAMi waits for one of them to be Ready."""
        t = args.tenant
        if t.system_pool_mode != POOL_EXTERNAL:
            return None
        return MachinesJoined(
            f"{name}-machines",
            kubeconfig=self.control_plane.automation_kubeconfig,
            tenant=t.name,
            pools={p.name: p.nodes for p in t.pools_of(POOL_EXTERNAL)},
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[*self.external])),
        )

    def _release_controller(
        self, name: str, args: GpuTenantArgs, on_tenant: pulumi.ResourceOptions, endpoint: str
    ) -> ReleaseController | None:
        """Only where HAMi's allocations are never completed by a real plugin."""
        t = args.tenant
        if t.real_gpus:
            return None
        return ReleaseController(
            f"{name}-releaser",
            ReleaseControllerArgs(
                tenant=t.name,
                lab_name=args.lab_name,
                network=args.network,
                image=args.release_controller_image,
                server=f"https://{endpoint}",
                admin_kubeconfig=self.control_plane.automation_kubeconfig,
                readmit=tuple(f"{w.namespace}/{w.name}" for w in t.workloads if w.kind == "Pod"),
            ),
            opts=on_tenant,
        )

    def _pools(self, args: GpuTenantArgs) -> dict[str, object]:
        """Per pool: its mode and its nodes (external: the join, a secret)."""
        t = args.tenant
        pools: dict[str, object] = {
            pool.name: {"mode": pool.mode, "nodes": t.node_names(args.lab_name, pool)} for pool in t.pools
        }
        for pool, ext in zip(t.pools_of(POOL_EXTERNAL), self.external, strict=True):
            pools[pool.name] = {"mode": pool.mode, "machines": pool.nodes, "join": ext.join}
        return pools

    def _quota(self, name: str, args: GpuTenantArgs, on_tenant: pulumi.ResourceOptions) -> GpuQuota:
        """The tenant's GPU budget, shared out over the namespaces its workloads use."""
        t = args.tenant
        declared: dict[str, list[Demand]] = {}
        for w, d in zip(t.workloads, t.demands(), strict=True):
            declared.setdefault(w.namespace, []).append(d)
        return GpuQuota(
            f"{name}-quota",
            GpuQuotaArgs(
                budget=t.quota.quota,
                declared={ns: total_usage(ds) for ns, ds in declared.items()},
                tenant=t.name,
            ),
            opts=on_tenant,
        )
