"""A least-privilege ServiceAccount in a tenant and a kubeconfig for its token (a Pulumi secret).

For the lab's own controllers (the release controller, KWOK): each acts with only the rules it
needs, never with the tenant's admin credentials. The token comes from a legacy token Secret,
read once with the admin kubeconfig; the kubeconfig built from it only ever travels as a secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.ops.kube import cluster_ca, token_kubeconfig
from components.providers.service_account_token import ServiceAccountToken

NAMESPACE = "kube-system"


def scoped_kubeconfig(
    name: str,
    *,
    account: str,
    rules: Sequence[Mapping[str, object]],
    server: str,
    provider: k8s.Provider,
    admin_kubeconfig: pulumi.Input[str],
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """ServiceAccount `account` bound to a ClusterRole of `rules`; its kubeconfig for `server`."""
    on_tenant = pulumi.ResourceOptions(parent=parent, provider=provider)
    sa = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=account, namespace=NAMESPACE), opts=on_tenant
    )
    role = k8s.rbac.v1.ClusterRole(
        f"{name}-role",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}"),
        rules=[dict(r) for r in rules],
        opts=on_tenant,
    )
    k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}"),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
        ),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=sa.metadata.name, namespace=NAMESPACE)],
        opts=on_tenant,
    )
    secret = k8s.core.v1.Secret(
        f"{name}-token",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=f"{account}-token",
            namespace=NAMESPACE,
            annotations={"kubernetes.io/service-account.name": sa.metadata.name},
        ),
        type="kubernetes.io/service-account-token",
        opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(ignore_changes=["data"])),
    )
    token = ServiceAccountToken(
        f"{name}-token-value",
        kubeconfig=admin_kubeconfig,
        namespace=NAMESPACE,
        secret=f"{account}-token",
        secret_uid=secret.metadata.uid,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return pulumi.Output.secret(
        pulumi.Output.all(token.token, pulumi.Output.from_input(admin_kubeconfig)).apply(
            lambda a: token_kubeconfig(server, cluster_ca(a[1]), a[0])
        )
    )
