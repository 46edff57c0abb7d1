"""TeamAccess: what one registered team may do in the shared management cluster, and nothing more.

The platform stack makes, per team: the team's namespace (`tenant-<team>`, for its
TenantControlPlane, where Kamaji also keeps the control plane's certificates and datastore
credentials) with a ResourceQuota and LimitRange that bound what its control plane may take from
the shared cluster, a ServiceAccount, a Role limited to what the team stack does there, and an
admission policy that holds the team's TenantControlPlane to an allow-list
(`control_plane_fields`): the team's own DataStore (TeamSlot.datastore), the schema the platform names for the team
(compared for equality), the NodePorts the registry reserved for it, a replica cap, the pinned
Konnectivity server version, and no field that would choose an image, an argument, a volume, a
privilege or an exposure in the shared cluster. It also publishes there what the team stack needs
of the platform (components.kube.platform_record), readable by the team's account and writable by
the platform only. The team stack receives a token of that ServiceAccount (see
`components.kube.team_token`), never the management cluster's admin nor the platform's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import TeamSlot
from components.config.versions import KONNECTIVITY_VERSION
from components.domain.names import (
    PLATFORM_RECORD,
    TEAM_ACCOUNT,
    admin_kubeconfig_secret,
    team_account_user,
    tenant_namespace,
)
from components.platform.component_options import waits_for
from components.platform.control_plane_fields import MAX_CONTROL_PLANE_REPLICAS, equals, present, refusals

TCP_GROUP = "kamaji.clastix.io"
REPLICAS = "spec.controlPlane.deployment.replicas"
KONNECTIVITY_SERVER_VERSION = "spec.addons.konnectivity.server.version"
ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ = ["get", "list", "watch"]


def control_plane_rules(team: str) -> list[dict[str, Any]]:
    """In tenant-<team>: its TenantControlPlane, read its admin kubeconfig Secret by name (never
    the namespace's other Secrets: Kamaji's certificates and datastore credentials), and read the
    platform's record for it (never write it)."""
    return [
        {"apiGroups": [TCP_GROUP], "resources": ["tenantcontrolplanes"], "verbs": ALL},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [admin_kubeconfig_secret(team)], "verbs": READ},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [PLATFORM_RECORD], "verbs": ["get"]},
    ]


def control_plane_policy(slot: TeamSlot, datastore: str, project: str) -> dict[str, Any]:
    """Admission rules for the team's TenantControlPlanes, each naming the field it holds: the
    held fields' values, and every refused field of `control_plane_fields.SPEC` absent (or at
    its default). They judge the team's own requests; Kamaji's updates of the objects it
    reconciles (finalizers, status) are its own."""
    team = slot.name
    schema = slot.datastore_schema(project)

    def rule(expression: str, message: str) -> dict[str, str]:
        return {"expression": expression, "message": f"team {team}'s control plane: {message}"}

    held = [
        rule(equals("spec.dataStore", datastore), f"spec.dataStore must be the team's own DataStore ({datastore!r})"),
        rule(
            f"{equals('spec.dataStoreSchema', schema)} && {equals('spec.dataStoreUsername', schema)}",
            f"spec.dataStoreSchema and spec.dataStoreUsername must be {schema!r} (the team's own keys)",
        ),
        rule(
            f"{equals('spec.networkProfile.port', slot.api_port)} && "
            f"{equals('spec.addons.konnectivity.server.port', slot.konnectivity_port)}",
            f"spec.networkProfile.port and spec.addons.konnectivity.server.port must be the NodePorts "
            f"reserved for it ({slot.api_port}, {slot.konnectivity_port})",
        ),
        rule(
            equals(KONNECTIVITY_SERVER_VERSION, KONNECTIVITY_VERSION),
            f"{KONNECTIVITY_SERVER_VERSION} must be {KONNECTIVITY_VERSION!r} "
            f"(the Konnectivity server image the platform mirrors and builds)",
        ),
        rule(
            equals("spec.controlPlane.service.serviceType", "NodePort"),
            "spec.controlPlane.service.serviceType must be NodePort (on its reserved ports)",
        ),
        rule(
            f"!({present(REPLICAS)}) || object.{REPLICAS} <= {MAX_CONTROL_PLANE_REPLICAS}",
            f"{REPLICAS} may be at most {MAX_CONTROL_PLANE_REPLICAS}",
        ),
    ]
    refused = [rule(expression, f"{path} is not allowed ({why})") for path, expression, why in refusals()]
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
        "matchConditions": [
            {
                "name": "the-teams-own-requests",
                "expression": f"request.userInfo.username == '{team_account_user(team)}'",
            }
        ],
        "validations": held + refused,
    }


# The containers of one control-plane pod Kamaji runs (kube-apiserver, -controller-manager,
# -scheduler, konnectivity-server), and what LimitRange gives one that names no resources. A
# request is what the scheduler reserves: an idle team's control-plane pod used 73m of CPU in all
# (the platform lab, one worker), so 50m per container (200m per pod) leaves it room to work
# while two teams, their etcds and Kamaji still fit a 2-core management node through a rollout's
# surge (100m each did not: a second team's rollout stayed Pending, `Insufficient cpu`).
CONTROL_PLANE_CONTAINERS = 4
DEFAULT_MEMORY_LIMIT_GI = 1
CONTAINER_LIMITS = {
    "type": "Container",
    "defaultRequest": {"cpu": "50m", "memory": "128Mi"},
    "default": {"memory": f"{DEFAULT_MEMORY_LIMIT_GI}Gi"},
    "max": {"memory": "4Gi"},
}
# What one team's control plane may hold in the shared cluster, whatever its spec asks: pods for
# its replicas through a rollout's surge (100 %), their requests and memory limits (room for every
# container of those pods at LimitRange's defaults), its one TenantControlPlane and its two
# NodePorts, and no load balancer. CPU is bounded by requests (the share under contention).
_SURGED_PODS = 2 * MAX_CONTROL_PLANE_REPLICAS
TCP_COUNT = f"count/tenantcontrolplanes.{TCP_GROUP}"
CONTROL_PLANE_QUOTA = {
    "pods": str(_SURGED_PODS + 2),
    "requests.cpu": "4",
    "requests.memory": "8Gi",
    "limits.memory": f"{_SURGED_PODS * CONTROL_PLANE_CONTAINERS * DEFAULT_MEMORY_LIMIT_GI}Gi",
    TCP_COUNT: "1",
    "services.nodeports": "2",
    "services.loadbalancers": "0",
}


@dataclass
class TeamAccessArgs:
    team: TeamSlot
    # The Pulumi project: the team's DataStore schema is named from it (TeamSlot.datastore_schema).
    project: str
    # What the platform publishes for the team (platform_link.published_record(...).data()).
    record: pulumi.Input[Mapping[str, str]]


class TeamAccess(pulumi.ComponentResource):
    """One team's namespace (with its quota and limits), ServiceAccount, Role, control-plane policy
    and the platform's record for it; the team's Role is bound only once the policy and the quota
    hold and the record is there. Options: `provider`
    the management cluster's; `depends_on` what all of it comes after (Kamaji's release)."""

    account: k8s.core.v1.ServiceAccount

    def __init__(self, name: str, args: TeamAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:TeamAccess", name, None, opts)
        team = args.team.name
        on = pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts))
        self.namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": tenant_namespace(team)}, opts=on)
        ns = self.namespace.metadata.name
        self.account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata={"name": TEAM_ACCOUNT, "namespace": ns}, opts=on
        )
        role = k8s.rbac.v1.Role(
            f"{name}-role", metadata={"name": TEAM_ACCOUNT, "namespace": ns}, rules=control_plane_rules(team), opts=on
        )
        # Until the quota controller has counted what the namespace holds, the API server refuses
        # every object the quota names ("status unknown for quota"); it counts a custom resource
        # only once its discovery has found it (about 30 s): the team's access waits for that.
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata={
                "name": TEAM_ACCOUNT,
                "namespace": ns,
                "annotations": {"pulumi.com/waitFor": f"jsonpath={{.status.used['{TCP_COUNT}']}}"},
            },
            spec={"hard": CONTROL_PLANE_QUOTA},
            opts=on,
        )
        self.record = k8s.core.v1.ConfigMap(
            f"{name}-platform-record",
            metadata={"name": PLATFORM_RECORD, "namespace": ns},
            data=args.record,
            opts=on,
        )
        limits = k8s.core.v1.LimitRange(
            f"{name}-limits",
            metadata={"name": TEAM_ACCOUNT, "namespace": ns},
            spec={"limits": [CONTAINER_LIMITS]},
            opts=on,
        )
        policy_name = f"gpu-tenancy-team-{team}"
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-tcp-policy",
            metadata={"name": policy_name},
            spec=control_plane_policy(args.team, args.team.datastore, args.project),
            opts=on,
        )
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
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
        k8s.rbac.v1.RoleBinding(
            f"{name}-binding",
            metadata={"name": TEAM_ACCOUNT, "namespace": ns},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": TEAM_ACCOUNT, "namespace": tenant_namespace(team)}],
            opts=pulumi.ResourceOptions.merge(
                on, pulumi.ResourceOptions(depends_on=[policy_binding, quota, limits, self.record])
            ),
        )
        self.register_outputs({"account": self.account.metadata.name})
