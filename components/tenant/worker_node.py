"""WorkerNode: a kindest/node container joined to its tenant with kubeadm; NodeBootstrap: the
RBAC those joins need in the tenant.

Lifecycle (components.lifecycle.bootstrap_token says why each step is safe):
- the container keeps a fixed name (its hostname is the Node name), so it is replaced
  delete-before-replace, and everything tied to it follows it;
- each container gets its own short-lived bootstrap token, handed to `kubeadm join` inside a
  JoinConfiguration on stdin (never an argument), with the tenant CA pinned;
- the join runs only for a new container: nothing else it reads changes between updates;
- NodeMembership waits for the registered Node, revokes the token, and on removal deletes the
  Node only while it is still this container's;
- a new image (a tenant upgrade) first drains the Node (NodeDrain), and the worker only starts
  after `after` (the previous worker settled), so a tenant's workers are replaced one at a time;
  GpuTenant settles each (NodeSettled) once its successor's fake cards are back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.config.model import CONTAINERD_WAIT_SECONDS
from components.domain.names import MACHINE_ID_ANNOTATION
from components.lifecycle.bootstrap_token import (
    NODE_BOOTSTRAP_BINDINGS,
    NODE_NETWORK_ROLE,
    NODE_NETWORK_RULES,
    join_configuration,
    token_id,
    worker_joins,
)
from components.nodes.node_container import NodeContainer
from components.platform.component_options import waits_for
from components.platform.lab_node import node_container
from components.providers.bootstrap_token import BootstrapToken
from components.providers.node_handover import NodeDrain
from components.providers.node_membership import NodeMembership

# Waits for the node's systemd and containerd, joins with the JoinConfiguration read from stdin
# (kept in the container's tmpfs only while kubeadm runs), then prints the container's machine ID.
# A failed join prints kubeadm's output, then one line saying why in the project's words.
JOIN = f"""set -eu
i=0
until docker exec "$NODE" systemctl is-active --quiet containerd; do
  i=$((i + 1))
  if [ "$i" -ge {CONTAINERD_WAIT_SECONDS // 2} ]; then
    echo "error: containerd in $NODE did not start within {CONTAINERD_WAIT_SECONDS} s" >&2; exit 1
  fi
  sleep 2
done
if ! out=$(docker exec -i "$NODE" sh -c 'umask 077; f=/run/gpu-tenancy-join.yaml; cat > "$f"; rc=0
    kubeadm join --config "$f" 2>&1 || rc=$?; rm -f "$f"; exit $rc' 2>&1); then
  printf '%s\\n' "$out" >&2
  case "$out" in
    *"none of the public keys"*)
      why="the tenant's CA is not the one pinned (caCertHashes); the tenant was made again since the pin was read" ;;
    *"could not find a JWS signature"*|*"has expired"*)
      why="its bootstrap token is not valid in the tenant (lapsed or revoked); the next pulumi up makes a fresh one" ;;
    *"failed to request the cluster-info ConfigMap"*)
      why="the tenant API server did not answer within the discovery timeout" ;;
    *) why="kubeadm join failed: $(printf '%s\\n' "$out" | grep '^error' | tail -n 1)" ;;
  esac
  echo "error: $NODE did not join its tenant: $why" >&2
  exit 1
fi
docker exec "$NODE" cat /etc/machine-id
"""


class NodeBootstrap(pulumi.ComponentResource):
    """The node-bootstrap RBAC in the tenant (option `provider`: the tenant's); tokens are per
    worker (WorkerNode)."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:NodeBootstrap", name, None, opts)
        on_tenant = pulumi.ResourceOptions(parent=self)
        self.node_network = k8s.rbac.v1.ClusterRole(
            f"{name}-node-network-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NODE_NETWORK_ROLE),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(api_groups=r["apiGroups"], resources=r["resources"], verbs=r["verbs"])
                for r in NODE_NETWORK_RULES
            ],
            opts=on_tenant,
        )
        self.bindings = [
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{suffix}"),
                role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
                subjects=[k8s.rbac.v1.SubjectArgs(api_group="rbac.authorization.k8s.io", kind="Group", name=group)],
                opts=on_tenant,
            )
            for suffix, (role, group) in NODE_BOOTSTRAP_BINDINGS.items()
        ]
        self.register_outputs({})


@dataclass
class WorkerNodeArgs:
    node_name: str
    image: str
    network: pulumi.Input[str]
    # host:port of the tenant API server, as the worker container reaches it.
    endpoint: str
    # The tenant's admin kubeconfig (secret): issues the token, watches the Node.
    tenant_kubeconfig: pulumi.Input[str]
    # The tenant CA's pin, sha256:<hex> (components.lifecycle.bootstrap_token.ca_cert_hash).
    ca_cert_hash: pulumi.Input[str]
    token_ttl_seconds: int
    # The node's pool labels (HAMi's scheduler is pinned by them).
    labels: dict[str, str]
    # Files the container starts with (path -> content): its runtime's registry mirror.
    files: dict[str, str] = field(default_factory=dict)
    # What must be finished before this worker is drained or replaced: the control plane at the
    # tenant's version, and the previous worker settled (one worker at a time). Only the drain
    # (and so the container) waits for these; its token waits for the component's `depends_on`.
    after: list[pulumi.Resource] = field(default_factory=list)


class WorkerNode(pulumi.ComponentResource):
    """kindest/node container (run the way kind runs it) + `kubeadm join` into its tenant.
    Options: `provider` the tenant's; `depends_on` what its join needs (the node-bootstrap RBAC)."""

    node_name: str
    container: docker.Container
    drain: NodeDrain
    join: command.local.Command
    membership: NodeMembership
    labels: k8s.core.v1.NodePatch
    # The machine ID of the container that joined: a new one is a replaced worker.
    machine_id: pulumi.Output[str]

    def __init__(self, name: str, args: WorkerNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:WorkerNode", name, None, opts)
        first = waits_for(opts)
        child = pulumi.ResourceOptions(parent=self)
        self.node_name = args.node_name
        # Pulled without waiting for anything: only the container waits for the drain.
        image = docker.RemoteImage(f"{name}-image", name=args.image, keep_locally=True, opts=child)
        self.drain = NodeDrain(
            f"{name}-drain",
            kubeconfig=args.tenant_kubeconfig,
            node=args.node_name,
            image=args.image,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*first, *args.after]),
        )
        spec = NodeContainer(name=args.node_name, image=args.image, files=tuple(sorted(args.files.items())))
        self.container = node_container(
            f"{name}-container",
            spec,
            image.image_id,
            args.network,
            # The name is the Node's: two containers cannot hold it at once.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=[self.drain]),
        )
        token = BootstrapToken(
            f"{name}-token",
            kubeconfig=args.tenant_kubeconfig,
            token_id=self.container.id.apply(lambda cid: token_id(f"{args.node_name}/{cid}")),
            ttl_seconds=args.token_ttl_seconds,
            description=f"gpu-tenancy: join of {args.node_name}",
            joins=worker_joins(args.node_name),
            opts=pulumi.ResourceOptions(parent=self, depends_on=first),
        )
        join_config = pulumi.Output.secret(
            pulumi.Output.all(token.token, args.ca_cert_hash).apply(
                lambda a: join_configuration(args.endpoint, a[0], a[1], args.node_name)
            )
        )
        self.join = command.local.Command(
            f"{name}-join",
            create=JOIN,
            stdin=join_config,
            environment={"NODE": self.container.name},
            triggers=[self.container.id],
            logging=command.local.Logging.STDOUT,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[token]),
        )
        self.machine_id = self.join.stdout.apply(lambda out: out.strip().splitlines()[-1] if out.strip() else "")
        self.membership = NodeMembership(
            f"{name}-membership",
            kubeconfig=args.tenant_kubeconfig,
            node=args.node_name,
            machine_id=self.machine_id,
            token_id=token.token_id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # With the machine's ID: a replaced worker registers a new Node, which gets its labels again.
        self.labels = k8s.core.v1.NodePatch(
            f"{name}-labels",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                name=args.node_name, labels=args.labels, annotations={MACHINE_ID_ANNOTATION: self.machine_id}
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.membership]),
        )
        self.register_outputs({"node": self.node_name})
