"""LockReleaser: the tenant's release controller, running with the lab.

A container on the lab's Docker network (from ReleaserImage), restarted by Docker if it dies,
removed on destroy. It authenticates as its own ServiceAccount, limited to what the controller
does (release_controller.RBAC_RULES); that token's kubeconfig reaches the container only as an
uploaded file, from a Pulumi secret: never on a command line, an environment variable or the
host's disk. Logs: `docker logs <lab>-<tenant>-releaser`; metrics and health on port 9400 of
the container's address (the `releaser` stack output).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.config.names import releaser_name
from components.ops.kube import cluster_ca, token_kubeconfig
from components.ops.release_controller import DEFAULT_PORT, RBAC_RULES
from components.providers.service_account_token import ServiceAccountToken

SERVICE_ACCOUNT = "gpu-tenancy-releaser"
NAMESPACE = "kube-system"
KUBECONFIG_PATH = "/run/secrets/gpu-tenancy/kubeconfig"
# The image runs as nobody (Dockerfile USER); the kubeconfig is readable by it alone.
RUN_AS = "65534"


@dataclass
class LockReleaserArgs:
    tenant: str
    lab_name: str
    network: pulumi.Input[str]
    image: pulumi.Input[str]
    # The tenant API server as the lab's Docker network reaches it.
    server: str
    provider: k8s.Provider
    # Used once, to read the ServiceAccount's token; the container never sees it.
    admin_kubeconfig: pulumi.Input[str]


class LockReleaser(pulumi.ComponentResource):
    container: docker.Container
    metrics_url: pulumi.Output[str]

    def __init__(self, name: str, args: LockReleaserArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:LockReleaser", name, None, opts)
        on_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=SERVICE_ACCOUNT, namespace=NAMESPACE), opts=on_tenant
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{SERVICE_ACCOUNT}"),
            rules=[dict(r) for r in RBAC_RULES],
            opts=on_tenant,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{SERVICE_ACCOUNT}"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=account.metadata.name, namespace=NAMESPACE)],
            opts=on_tenant,
        )
        secret = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{SERVICE_ACCOUNT}-token",
                namespace=NAMESPACE,
                annotations={"kubernetes.io/service-account.name": account.metadata.name},
            ),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(ignore_changes=["data"])),
        )
        token = ServiceAccountToken(
            f"{name}-token-value",
            kubeconfig=args.admin_kubeconfig,
            namespace=NAMESPACE,
            secret=f"{SERVICE_ACCOUNT}-token",
            secret_uid=secret.metadata.uid,
            opts=pulumi.ResourceOptions(parent=self),
        )
        kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(token.token, pulumi.Output.from_input(args.admin_kubeconfig)).apply(
                lambda a: token_kubeconfig(args.server, cluster_ca(a[1]), a[0])
            )
        )
        self.container = docker.Container(
            f"{name}-container",
            name=releaser_name(args.lab_name, args.tenant),
            image=args.image,
            restart="unless-stopped",
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            uploads=[
                docker.ContainerUploadArgs(
                    file=KUBECONFIG_PATH, content=kubeconfig, owner=RUN_AS, group=RUN_AS, permissions="0400"
                )
            ],
            labels=[docker.ContainerLabelArgs(label="gpu-tenancy/tenant", value=args.tenant)],
            must_run=True,
            # `up` waits for the image's HEALTHCHECK: the controller listed the tenant's pods.
            wait=True,
            wait_timeout=120,
            # A fixed container name cannot exist twice: the old one goes first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.metrics_url = self.container.network_datas.apply(
            lambda nets: f"http://{nets[0].ip_address}:{DEFAULT_PORT}/metrics" if nets else ""
        )
        self.register_outputs({"container": self.container.name, "metrics": self.metrics_url})
