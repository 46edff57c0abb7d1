"""AutomationIdentity: the stack's own identity inside a tenant, made with the tenant's super-admin.

Kamaji's `super-admin.conf` is in group system:masters: no RBAC applies to it and it cannot be
revoked. It is used here, by one provider, for one thing: ServiceAccount AUTOMATION_ACCOUNT bound
to cluster-admin (the stack installs charts, webhooks and RBAC, so it needs the whole API). All
else the stack does in the tenant runs on a bound token of that account: revocable (delete the
binding or the account), named in audit logs, expiring after TOKEN_SECONDS and renewed by the
first `up` in its last RENEW_BEFORE_SECONDS (its preview then shows the tenant's resources as
unknown, never a token about to lapse).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.domain.names import AUTOMATION_ACCOUNT
from components.kube.client import cluster_ca, endpoint_kubeconfig, token_kubeconfig
from components.providers.bound_token import BoundToken

NAMESPACE = "kube-system"
# A year (the life of Kamaji's certificates); renewed in its last 30 days.
TOKEN_SECONDS = 365 * 24 * 3600
RENEW_BEFORE_SECONDS = 30 * 24 * 3600


class AutomationIdentity(pulumi.ComponentResource):
    """`kubeconfig` (a secret) and `provider` for `endpoint`, on the automation account's token."""

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self,
        name: str,
        *,
        super_admin: pulumi.Input[str],
        endpoint: str,
        bootstrap_provider_name: str,
        provider_name: str,
        token_seconds: int = TOKEN_SECONDS,
        renew_before_seconds: int = RENEW_BEFORE_SECONDS,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpu-tenancy:index:AutomationIdentity", name, None, opts)
        # Its one cluster named `endpoint`: a provider's `cluster` selects a kubeconfig cluster by name.
        super_admin = pulumi.Output.secret(
            pulumi.Output.from_input(super_admin).apply(lambda k: endpoint_kubeconfig(k, endpoint))
        )
        # `cluster` names the endpoint, known at preview: the policy pack attributes objects by it.
        bootstrap = k8s.Provider(
            bootstrap_provider_name, kubeconfig=super_admin, cluster=endpoint, opts=pulumi.ResourceOptions(parent=self)
        )
        on_bootstrap = pulumi.ResourceOptions(parent=self, provider=bootstrap)
        subject = {"kind": "ServiceAccount", "name": AUTOMATION_ACCOUNT, "namespace": NAMESPACE}
        account = k8s.core.v1.ServiceAccount(
            name, metadata={"name": AUTOMATION_ACCOUNT, "namespace": NAMESPACE}, opts=on_bootstrap
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata={"name": f"gpu-tenancy:{AUTOMATION_ACCOUNT}"},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            subjects=[subject],
            opts=on_bootstrap,
        )
        self.token = BoundToken(
            f"{name}-token",
            issuer=super_admin,
            namespace=NAMESPACE,
            account=AUTOMATION_ACCOUNT,
            account_uid=account.metadata.uid,
            seconds=token_seconds,
            renew_before_seconds=renew_before_seconds,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding]),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.token.token, super_admin).apply(
                lambda a: token_kubeconfig(endpoint, cluster_ca(a[1]), a[0], name=endpoint)
            )
        )
        self.provider = k8s.Provider(
            provider_name, kubeconfig=self.kubeconfig, cluster=endpoint, opts=pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"account": AUTOMATION_ACCOUNT, "expires": self.token.expires})
