"""What the release controller's identity may write, narrowed below what RBAC can say.

RBAC can only grant "patch any pod and any node". The controller needs far less: remove HAMi's
node lock, and set `hami.io/bind-phase: success` (HAMi's device plugin, on its success path,
also rewrites `hami.io/vgpu-devices-to-allocate`). Two ValidatingAdmissionPolicies, bound to
that one ServiceAccount by a match condition, refuse every other change it could make to a
node or a pod: labels, taints and the rest of the spec, finalizers, owners, any other
annotation. A third lets it create only the Events it posts: a Warning about a pod, with its
own reason and source. A stolen controller token can then neither cordon a node, relabel a pod,
nor write Events that pass for another component's. Where the stack has bare pods to make again
(readmit), two more let it delete only those pods, and only once a kubelet refused them at
admission, and create only those pods, for the scheduler to place (no node, none of HAMi's
placement), with no host namespace, host path, privilege or other ServiceAccount.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.controllers.release.readmit import HAMI_PREFIX, REFUSED_REASON
from components.domain import hami_annotations as ha
from components.domain.names import WORKLOAD_LABEL

NODES_POLICY = "gpu-tenancy-releaser-nodes"
PODS_POLICY = "gpu-tenancy-releaser-pods"
EVENTS_POLICY = "gpu-tenancy-releaser-events"
READMIT_CREATE_POLICY = "gpu-tenancy-releaser-readmit-create"
READMIT_DELETE_POLICY = "gpu-tenancy-releaser-readmit-delete"
# Who the Events the controller posts come from, and the reasons it posts.
EVENT_SOURCE = "gpu-tenancy-release-controller"
STUCK_REASON = "ReleaseStuck"
EVENT_REASONS = (STUCK_REASON,)

_OLD = "oldObject.metadata.?annotations.orValue({})"
_NEW = "object.metadata.?annotations.orValue({})"
_SAME = [
    ("object.spec == oldObject.spec", "its spec (taints, unschedulable, containers, ...)"),
    ("object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({})", "its labels"),
    ("object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])", "its finalizers"),
    (
        "object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([])",
        "its owners",
    ),
]
POD_WRITABLE = (ha.BIND_PHASE, ha.DEVICES_TO_ALLOCATE)


def _cel_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _policy(
    name: str, resource: str, kind: str, rules: list[tuple[str, str]], user: str, operation: str = "UPDATE"
) -> dict[str, Any]:
    who = f"the release controller ({user})"
    same = _SAME if operation == "UPDATE" else []
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": [operation], "resources": [resource]}
                ]
            },
            "matchConditions": [{"name": "release-controller", "expression": f"request.userInfo.username == '{user}'"}],
            **(
                {"variables": [{"name": "old", "expression": _OLD}, {"name": "new", "expression": _NEW}]}
                if same
                else {}
            ),
            "validations": [
                *({"expression": e, "message": f"{who} may not change a {kind}'s {what}"} for e, what in same),
                *({"expression": e, "message": f"{who} {what}"} for e, what in rules),
            ],
        },
    }


def write_policies(user: str, readmit: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The policies for the ServiceAccount `user` (system:serviceaccount:<ns>:<name>); `readmit`:
    the bare pods (NAMESPACE/NAME) it may make again (none: it may create and delete no pod)."""
    node_rules = [
        (
            "variables.new.all(k, k in variables.old && variables.new[k] == variables.old[k]) && "
            f"variables.old.all(k, k == '{ha.NODE_LOCK}' || k in variables.new)",
            f"may only remove {ha.NODE_LOCK} from a node's annotations",
        )
    ]
    writable = _cel_list(POD_WRITABLE)
    pod_rules = [
        (
            "variables.new.all(k, k in variables.old ? "
            f"(variables.new[k] == variables.old[k] || k in {writable}) : k == '{ha.BIND_PHASE}') && "
            "variables.old.all(k, k in variables.new)",
            f"may only set {' and '.join(POD_WRITABLE)} among a pod's annotations",
        ),
        (
            f"!('{ha.BIND_PHASE}' in variables.new) || variables.new['{ha.BIND_PHASE}'] == '{ha.PHASE_SUCCESS}' || "
            f"('{ha.BIND_PHASE}' in variables.old && variables.old['{ha.BIND_PHASE}'] == "
            f"variables.new['{ha.BIND_PHASE}'])",
            f"may only set {ha.BIND_PHASE} to {ha.PHASE_SUCCESS}",
        ),
    ]
    event_rules = [
        (
            "object.involvedObject.kind == 'Pod' && object.involvedObject.?apiVersion.orValue('v1') == 'v1' && "
            "object.involvedObject.?namespace.orValue('') == object.metadata.?namespace.orValue('')",
            "may only post Events about a pod, in the pod's namespace",
        ),
        (
            f"object.?reason.orValue('') in {_cel_list(EVENT_REASONS)} && object.?type.orValue('') == 'Warning' && "
            f"object.?source.component.orValue('') == '{EVENT_SOURCE}'",
            f"may only post Warning Events from {EVENT_SOURCE} with reason {' or '.join(EVENT_REASONS)}",
        ),
    ]
    named = _cel_list(tuple(sorted(readmit)))
    create_rules = [
        (f"(request.namespace + '/' + request.name) in {named}", f"may only create the pods {named}"),
        (
            f"'{WORKLOAD_LABEL}' in object.metadata.?labels.orValue({{}}) && "
            f"!object.metadata.?annotations.orValue({{}}).exists(k, k.startsWith('{HAMI_PREFIX}'))",
            f"may only create a pod labelled {WORKLOAD_LABEL}, without {HAMI_PREFIX} annotations",
        ),
        ("object.spec.?nodeName.orValue('') == ''", "may only create a pod for the scheduler to place (no nodeName)"),
        (
            "!object.spec.?hostNetwork.orValue(false) && !object.spec.?hostPID.orValue(false) && "
            "!object.spec.?hostIPC.orValue(false) && object.spec.?volumes.orValue([]).all(v, !has(v.hostPath)) && "
            "object.spec.?containers.orValue([]).all(c, !c.?securityContext.?privileged.orValue(false)) && "
            "object.spec.?initContainers.orValue([]).all(c, !c.?securityContext.?privileged.orValue(false))",
            "may not create a pod with a host namespace, a host path or a privileged container",
        ),
        (
            "object.spec.?serviceAccountName.orValue('default') == 'default'",
            "may only create a pod of the namespace's default ServiceAccount",
        ),
    ]
    delete_rules = [
        (f"(request.namespace + '/' + request.name) in {named}", f"may only delete the pods {named}"),
        (
            f"oldObject.status.?phase.orValue('') == 'Failed' && oldObject.status.?reason.orValue('') == "
            f"'{REFUSED_REASON}'",
            f"may only delete a pod a kubelet refused at admission ({REFUSED_REASON})",
        ),
    ]
    return [
        _policy(NODES_POLICY, "nodes", "node", node_rules, user),
        _policy(PODS_POLICY, "pods", "pod", pod_rules, user),
        _policy(EVENTS_POLICY, "events", "event", event_rules, user, operation="CREATE"),
        _policy(READMIT_CREATE_POLICY, "pods", "pod", create_rules, user, operation="CREATE"),
        _policy(READMIT_DELETE_POLICY, "pods", "pod", delete_rules, user, operation="DELETE"),
    ]


def binding(policy: dict[str, Any]) -> dict[str, Any]:
    """The binding that makes a policy refuse (every namespace: nodes have none)."""
    name = policy["metadata"]["name"]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


# What the controller needs in a tenant, and nothing more (a ServiceAccount's ClusterRole);
# what it may write with it is narrowed further by an admission policy (write_policies below).
RBAC_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    # list: HAMi's reasons for a Pending pod; create: a stuck pod's Event (narrowed by EVENTS_POLICY).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "create"]},
)
# With bare pods to make again (narrowed to those pods by the readmit policies).
READMIT_RULES: tuple[dict[str, Any], ...] = ({"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},)


def rbac_rules(readmit: Sequence[str] = ()) -> tuple[dict[str, Any], ...]:
    return RBAC_RULES + (READMIT_RULES if readmit else ())
