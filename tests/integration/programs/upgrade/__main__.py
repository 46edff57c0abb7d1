"""Test program: a tenant's upgrade plan on an adopted cluster (secret config `kubeconfig`), wired
as GpuTenant wires it: the project's ControlPlane (its version gate and its wait for Kamaji to run
the version; Kamaji's status by the test's stand-in), then the docker workers one at a time
(NodeDrain -> machine -> the inventory's fake cards -> NodeSettled -> the next worker's drain),
then HAMi's chart values (`hami_values`, the kube-scheduler at the tenant's version).

Stand-ins, for what cannot run here: each docker container and its `kubeadm join` is a
StandInMachine (a KWOK node made again for a new image, as a new container registers one); HAMi's
chart, a ConfigMap of its values (no chart registry). Config: `version`, `apiPort` (the endpoint
the test forwards to its API server), `workers`, `drainSeconds`, `settleSeconds`."""

import json

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.config.model import POOL_DOCKER
from components.providers.node_handover import NodeDrain, NodeSettled
from components.tenant.control_plane import ControlPlane, ControlPlaneArgs
from components.tenant.gpu_inventory import MockGpuInventory, MockGpuInventoryArgs
from components.tenant.hami import hami_values
from tests.support.stand_in_worker import StandInMachine

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
management = k8s.Provider("adopted", kubeconfig=kubeconfig)
tenant = {
    "name": "team-a",
    "kubernetesVersion": config.require("version"),
    "apiPort": config.require_int("apiPort"),
    "pools": [{"name": "worker", "mode": "docker", "nodes": config.require_int("workers")}],
    "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
    "quota": {"gpus": 4, "gpumemMb": 81920, "gpucoresPercent": 100},
}
stack = load_stack_config(pulumi.get_project(), {"tenants": [tenant]})
(t,) = stack.tenants
cp = ControlPlane(
    "team-a-cp",
    ControlPlaneArgs(
        tenant=t,
        address="127.0.0.1",
        datastore="default",
        schema=stack.datastore_schema(pulumi.get_stack(), t.name),
    ),
    opts=pulumi.ResourceOptions(provider=management),
)
admin = cp.automation_kubeconfig
inventory = MockGpuInventory(
    "team-a-gpus",
    MockGpuInventoryArgs(tenant=t.name, fleet=t.gpu, nodes=[], kubeconfig=admin),
    opts=pulumi.ResourceOptions(provider=cp.provider),
)
after: list[pulumi.Resource] = [cp.control_plane]
for pool in t.pools_of(POOL_DOCKER):
    for i, node in enumerate(t.node_names("lab", pool)):
        name = f"team-a-{pool.name}-{i}"
        drain = NodeDrain(
            f"{name}-drain",
            kubeconfig=admin,
            node=node,
            image=t.worker_image(None),
            timeout_seconds=config.require_int("drainSeconds"),
            opts=pulumi.ResourceOptions(depends_on=after),
        )
        machine = StandInMachine(
            f"{name}-machine",
            kubeconfig=admin,
            node=node,
            image=t.worker_image(None),
            tenant=t.name,
            pool=pool.name,
            opts=pulumi.ResourceOptions(depends_on=[drain]),
        )
        cards = inventory.add(node, machine.machine_id, depends_on=[machine])
        settled = NodeSettled(
            f"{name}-settled",
            kubeconfig=admin,
            node=node,
            machine_id=machine.machine_id,
            moved=drain.moved,
            timeout_seconds=config.require_int("settleSeconds"),
            opts=pulumi.ResourceOptions(depends_on=[cards]),
        )
        after = [settled]
inventory.close()
hami = k8s.core.v1.ConfigMap(
    "team-a-hami-values",
    metadata={"name": "hami-values", "namespace": "default"},
    data={"values.json": json.dumps(hami_values(t.kubernetes_version, stack.hami), sort_keys=True)},
    opts=pulumi.ResourceOptions(provider=cp.provider, depends_on=after),
)
pulumi.export("nodes", [n for pool in t.pools_of(POOL_DOCKER) for n in t.node_names("lab", pool)])
