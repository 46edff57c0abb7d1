"""TeamAccess: what one registered team may do in the shared management cluster, and nothing more.

The platform stack makes, per team: the team's namespace (`tenant-<team>`, for its
TenantControlPlane, where Kamaji also keeps the control plane's certificates and datastore
credentials), a ServiceAccount, a Role limited to what the team stack does there, and an
admission policy that holds the team's TenantControlPlane to the
platform's DataStore, a schema of its own and the NodePorts the registry reserved for it, with
no extra containers, volumes or arguments (which would run code or mount files in the shared
cluster). The team stack receives a token of that ServiceAccount (see `components.ops.team_token`),
never the management cluster's admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import TeamSlot
from components.config.names import (
    TEAM_ACCOUNT,
    admin_kubeconfig_secret,
    tenant_namespace,
)

TCP_GROUP = "kamaji.clastix.io"
ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ = ["get", "list", "watch"]


def control_plane_rules(team: str) -> list[dict[str, Any]]:
    """In tenant-<team>: its TenantControlPlane, and read its admin kubeconfig Secret by name
    (never the namespace's other Secrets: Kamaji's certificates and datastore credentials)."""
    return [
        {"apiGroups": [TCP_GROUP], "resources": ["tenantcontrolplanes"], "verbs": ALL},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [admin_kubeconfig_secret(team)], "verbs": READ},
    ]


def control_plane_policy(slot: TeamSlot, datastore: str) -> dict[str, Any]:
    """Admission rules for the team's TenantControlPlanes (each with its own message)."""
    schema_tail = "_" + slot.name.replace("-", "_")
    dep = "object.spec.controlPlane.deployment"

    def rule(expression: str, message: str) -> dict[str, str]:
        return {"expression": expression, "message": f"team {slot.name}'s control plane: {message}"}

    extras = ("additionalContainers", "additionalInitContainers", "additionalVolumes", "additionalVolumeMounts")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [TCP_GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["tenantcontrolplanes"],
                }
            ]
        },
        "validations": [
            rule(f"object.spec.dataStore == '{datastore}'", f"its dataStore must be the platform's ({datastore!r})"),
            rule(
                f"object.spec.dataStoreSchema.endsWith('{schema_tail}') && "
                "object.spec.dataStoreUsername == object.spec.dataStoreSchema",
                f"its dataStoreSchema must end in {schema_tail!r} (its own keys) and dataStoreUsername equal it",
            ),
            rule(
                f"object.spec.networkProfile.port == {slot.api_port} && "
                f"object.spec.addons.konnectivity.server.port == {slot.konnectivity_port}",
                f"it listens on the NodePorts reserved for it ({slot.api_port}, {slot.konnectivity_port})",
            ),
            rule(
                f"!has({dep}) || ({' && '.join(f'!has({dep}.{f})' for f in extras)} && "
                f"!has({dep}.extraArgs) && (!has({dep}.serviceAccountName) || {dep}.serviceAccountName == 'default'))",
                "no additional containers, volumes, arguments or service account in the shared cluster",
            ),
        ],
    }


@dataclass
class TeamAccessArgs:
    team: TeamSlot
    datastore: pulumi.Input[str]
    provider: k8s.Provider


class TeamAccess(pulumi.ComponentResource):
    """One team's namespace, ServiceAccount, Role and control-plane policy."""

    account: k8s.core.v1.ServiceAccount

    def __init__(self, name: str, args: TeamAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:TeamAccess", name, None, opts)
        team = args.team.name
        on = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": tenant_namespace(team)}, opts=on)
        ns = self.namespace.metadata.name
        self.account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata={"name": TEAM_ACCOUNT, "namespace": ns}, opts=on
        )
        role = k8s.rbac.v1.Role(
            f"{name}-role", metadata={"name": TEAM_ACCOUNT, "namespace": ns}, rules=control_plane_rules(team), opts=on
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-binding",
            metadata={"name": TEAM_ACCOUNT, "namespace": ns},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": TEAM_ACCOUNT, "namespace": tenant_namespace(team)}],
            opts=on,
        )
        policy_name = f"gpu-tenancy-team-{team}"
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-tcp-policy",
            metadata={"name": policy_name},
            spec=pulumi.Output.from_input(args.datastore).apply(lambda d: control_plane_policy(args.team, d)),
            opts=on,
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-tcp-policy-binding",
            metadata={"name": policy_name},
            spec={
                "policyName": policy_name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant_namespace(team)}}
                },
            },
            opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[policy])),
        )
        self.register_outputs({"account": self.account.metadata.name})
