"""WorkerNode: a kindest/node container joined to its tenant with kubeadm; NodeBootstrap: the
token and RBAC that join needs, created in the tenant."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"

# Prints a fresh 16-character token secret once; Pulumi keeps it (as a secret) in state.
MAKE_TOKEN_SECRET = (
    'python3 -c "import secrets,string;'
    "a=string.ascii_lowercase+string.digits;print(''.join(secrets.choice(a) for _ in range(16)))\""
)

# Waits for the node's systemd and containerd, then joins. Preflight is skipped as kind does:
# its checks (swap, kernel modules) do not hold inside a container.
JOIN = """set -eu
i=0
until docker exec "$NODE" systemctl is-active --quiet containerd; do
  i=$((i + 1))
  if [ "$i" -ge 60 ]; then echo "containerd in $NODE did not start within 120 s" >&2; exit 1; fi
  sleep 2
done
docker exec "$NODE" kubeadm join "$ENDPOINT" --token "$TOKEN" \\
  --discovery-token-unsafe-skip-ca-verification --skip-phases=preflight --node-name "$NODE"
"""

# Removes the Node object from the tenant (with the tenant's kubeconfig, never written to the
# host) and resets kubeadm, so destroy leaves the tenant without a NotReady ghost node.
LEAVE = """set -u
printf '%s' "$TENANT_KUBECONFIG" | docker exec -i "$NODE" sh -c \\
  'f=$(mktemp); cat > "$f"; kubectl --kubeconfig "$f" delete node "$0" --ignore-not-found --wait=true; rm -f "$f"' \\
  "$NODE" || echo "could not delete node $NODE from its tenant" >&2
docker exec "$NODE" kubeadm reset -f >/dev/null 2>&1 || true
"""


def token_id(project: str, stack: str, tenant: str) -> str:
    """The public half of the bootstrap token: 6 chars [a-z0-9], stable per stack and tenant."""
    return hashlib.sha256(f"{project}/{stack}/{tenant}".encode()).hexdigest()[:6]


@dataclass
class NodeBootstrapArgs:
    # The token's public half (token_id): 6 characters [a-z0-9].
    token_public: str
    provider: k8s.Provider


class NodeBootstrap(pulumi.ComponentResource):
    """A kubeadm bootstrap token Secret and the node-bootstrap RBAC, in the tenant."""

    token: pulumi.Output[str]

    def __init__(self, name: str, args: NodeBootstrapArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:NodeBootstrap", name, None, opts)
        token_public, provider = args.token_public, args.provider
        gen = command.local.Command(
            f"{name}-token-secret",
            create=MAKE_TOKEN_SECRET,
            logging=command.local.Logging.NONE,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["stdout"]),
        )
        token_secret = pulumi.Output.secret(gen.stdout.apply(str.strip))
        on_tenant = pulumi.ResourceOptions(parent=self, provider=provider)
        self.secret = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"bootstrap-token-{token_public}", namespace="kube-system"),
            type="bootstrap.kubernetes.io/token",
            string_data={
                "token-id": token_public,
                "token-secret": token_secret,
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
                "auth-extra-groups": BOOTSTRAP_GROUP,
            },
            opts=on_tenant,
        )
        bindings = {
            "node-bootstrapper": ("system:node-bootstrapper", BOOTSTRAP_GROUP),
            "node-autoapprove-bootstrap": (
                "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                BOOTSTRAP_GROUP,
            ),
            "node-autoapprove-certificate-rotation": (
                "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                "system:nodes",
            ),
        }
        self.bindings = [
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{suffix}"),
                role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
                subjects=[k8s.rbac.v1.SubjectArgs(api_group="rbac.authorization.k8s.io", kind="Group", name=group)],
                opts=on_tenant,
            )
            for suffix, (role, group) in bindings.items()
        ]
        self.token = pulumi.Output.secret(pulumi.Output.concat(token_public, ".", token_secret))
        self.register_outputs({})


@dataclass
class WorkerNodeArgs:
    node_name: str
    image: str
    network: pulumi.Input[str]
    endpoint: str
    bootstrap: NodeBootstrap
    tenant_kubeconfig: pulumi.Input[str]


class WorkerNode(pulumi.ComponentResource):
    """kindest/node container (run the way kind runs it) + `kubeadm join` into its tenant."""

    node_name: str
    container: docker.Container
    join: command.local.Command

    def __init__(self, name: str, args: WorkerNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:WorkerNode", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.node_name = args.node_name
        image = docker.RemoteImage(f"{name}-image", name=args.image, keep_locally=True, opts=child)
        var = docker.Volume(f"{name}-var", name=f"{args.node_name}-var", opts=child)
        self.container = docker.Container(
            f"{name}-container",
            name=args.node_name,
            hostname=args.node_name,
            image=image.image_id,
            privileged=True,
            security_opts=["seccomp=unconfined", "apparmor=unconfined"],
            tmpfs={"/tmp": "", "/run": ""},
            cgroupns_mode="private",
            envs=["container=docker"],
            volumes=[
                docker.ContainerVolumeArgs(volume_name=var.name, container_path="/var"),
                docker.ContainerVolumeArgs(host_path="/lib/modules", container_path="/lib/modules", read_only=True),
            ],
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            restart="on-failure",
            max_retry_count=1,
            must_run=True,
            opts=child,
        )
        self.join = command.local.Command(
            f"{name}-join",
            create=JOIN,
            delete=LEAVE,
            environment={
                "NODE": self.container.name,
                "ENDPOINT": args.endpoint,
                "TOKEN": args.bootstrap.token,
                "TENANT_KUBECONFIG": pulumi.Output.secret(args.tenant_kubeconfig),
            },
            triggers=[self.container.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.bootstrap], additional_secret_outputs=["stdout"]),
        )
        self.register_outputs({"node": self.node_name})
