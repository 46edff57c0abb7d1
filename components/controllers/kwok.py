"""KWOK's configuration in a tenant (components.tenant.kwok_controller runs it): its RBAC, node
stages and flags. It manages exactly the Nodes a simulated pool makes
(components.lifecycle.simulated_nodes), told by their annotation."""

from __future__ import annotations

# What KWOK is told to manage (--manage-nodes-with-annotation-selector): these nodes only.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

# What KWOK does in a tenant, and nothing more: keep its nodes' status and leases, move the
# pods bound to them through their lifecycle, and report events.
KWOK_RBAC_RULES: tuple[dict[str, object], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch", "update", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
)
# KWOK's health endpoint (--server-address), probed by the lab's Deployment.
KWOK_PORT = 10247


# KWOK's node stages, given explicitly. KWOK 0.7.0 picks its default node stages with the lease
# test inverted (cmd/root.go: getDefaultNodeStages(NodeLeaseDurationSeconds == 0)): with leases
# on it also patches every node's status every 20-45 s, which at 1,000 nodes is about 45 API
# writes a second on top of the leases. These stages make a node Ready once, then refresh its
# conditions every 5-6 minutes; liveness is the lease's job. Capacity, allocatable and addresses
# already on the node are kept (the status is merged).
NODE_STAGES = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gpu-tenancy-node-ready
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - {type: {{ .type | Quote }}, status: {{ .status | Quote }}, reason: {{ .reason | Quote }},
         message: {{ .message | Quote }}, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      {{ end }}
      {{ with NodeIP }}
      addresses:
      - {type: InternalIP, address: {{ . | Quote }}}
      {{ end }}
      nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: {{ printf "kwok-%s" Version | Quote }}}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gpu-tenancy-node-refresh
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ['True']}
  delay: {durationMilliseconds: 300000, jitterDurationMilliseconds: 360000}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - {type: {{ .type | Quote }}, status: {{ .status | Quote }}, reason: {{ .reason | Quote }},
         message: {{ .message | Quote }}, lastHeartbeatTime: {{ $now | Quote }}}
      {{ end }}
"""


# A simulated node's lease, renewed every quarter of it (as kubelet does): 20 s, well inside
# kube-controller-manager's 50 s node-monitor grace period, at half the writes of kubelet's 40 s
# lease (1,000 nodes: 50 renewals a second instead of 100).
NODE_LEASE_SECONDS = 80


def kwok_args(kubeconfig_path: str, pod_cidr: str, stages_path: str) -> list[str]:
    """The controller's flags: only the nodes annotated as ours, our node stages (NODE_STAGES, a
    file at `stages_path`), leases for liveness, pod IPs from the tenant's pod network when a
    node has no podCIDR of its own."""
    first_ip = pod_cidr.split("/")[0].rsplit(".", 1)[0] + ".1"
    return [
        f"--kubeconfig={kubeconfig_path}",
        f"--config={stages_path}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        f"--cidr={first_ip}/{pod_cidr.split('/')[1]}",
        f"--server-address=0.0.0.0:{KWOK_PORT}",
    ]
