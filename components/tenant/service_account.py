"""A least-privilege ServiceAccount in a tenant and a kubeconfig for a bound token of it (a secret).

For the lab's own controllers (the release controller, KWOK): each acts with only the rules it
needs, never with the tenant's admin credentials. The stack issues a bound token (TokenRequest)
of STACK_TOKEN_SECONDS, renewed by `up` once less than RENEW_BEFORE_SECONDS is left; the
controller's keeper (components.kube.bound_token) renews its working token every 16 h with the
token itself, which the account's own Role allows for that account alone. A lab switched off for
less than about five days comes back by itself; after longer, `pulumi up` issues a new token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.kube.bound_token import self_renewal_rules
from components.kube.client import cluster_ca, token_kubeconfig
from components.providers.bound_token import BoundToken

NAMESPACE = "kube-system"
STACK_TOKEN_SECONDS = 7 * 24 * 3600
RENEW_BEFORE_SECONDS = 2 * 24 * 3600


def scoped_kubeconfig(
    name: str,
    *,
    account: str,
    rules: Sequence[Mapping[str, object]],
    server: str,
    admin_kubeconfig: pulumi.Input[str],
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """ServiceAccount `account` bound to a ClusterRole of `rules` (and allowed to renew its own
    token); a kubeconfig of a bound token of it, for `server`. Made on `parent`'s provider."""
    on_tenant = pulumi.ResourceOptions(parent=parent)
    sa = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=account, namespace=NAMESPACE), opts=on_tenant
    )
    subjects = [k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=sa.metadata.name, namespace=NAMESPACE)]
    role = k8s.rbac.v1.ClusterRole(
        f"{name}-role",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}"),
        rules=[dict(r) for r in rules],
        opts=on_tenant,
    )
    binding = k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}"),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
        ),
        subjects=subjects,
        opts=on_tenant,
    )
    renewal = k8s.rbac.v1.Role(
        f"{name}-renewal-role",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}:renewal", namespace=NAMESPACE),
        rules=self_renewal_rules(account),
        opts=on_tenant,
    )
    renewal_binding = k8s.rbac.v1.RoleBinding(
        f"{name}-renewal-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"gpu-tenancy:{account}:renewal", namespace=NAMESPACE),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="Role", name=renewal.metadata.name
        ),
        subjects=subjects,
        opts=on_tenant,
    )
    token = BoundToken(
        f"{name}-token",
        issuer=admin_kubeconfig,
        namespace=NAMESPACE,
        account=account,
        account_uid=sa.metadata.uid,
        seconds=STACK_TOKEN_SECONDS,
        renew_before_seconds=RENEW_BEFORE_SECONDS,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[binding, renewal_binding]),
    )
    return pulumi.Output.secret(
        pulumi.Output.all(token.token, pulumi.Output.from_input(admin_kubeconfig)).apply(
            lambda a: token_kubeconfig(server, cluster_ca(a[1]), a[0])
        )
    )
