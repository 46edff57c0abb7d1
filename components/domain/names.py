"""Names and labels this project gives the objects it creates (read back by the policy pack and
the release controller): one place, so every reader agrees."""

from __future__ import annotations

from components.domain.catalog import GpuModel

# The Pulumi project (Pulumi.yaml's name): the prefix of every stack config key.
PROJECT = "gpu-tenancy"

TENANT_LABEL = "gpu-tenancy/tenant"
WORKLOAD_LABEL = "gpu-tenancy/workload"
# Nodes whose GPUs are fake (the inventory writes their cards): only there does the release
# controller finish HAMi's allocation; on real GPU nodes the device plugin does it. Under
# node-restriction.kubernetes.io/, which the NodeRestriction admission plugin forbids a kubelet to
# set on its own Node: a machine of an external pool cannot call its real cards fake.
MOCK_GPU_NODE_LABEL = ("node-restriction.kubernetes.io/gpu-tenancy-mock-gpu", "true")
# On a docker worker's Node: the machine its fake cards were written for (a replaced worker's new
# Node gets them again).
MACHINE_ID_ANNOTATION = "gpu-tenancy/machine-id"
# On a webhook server's pods: its serving certificate's SHA-256 (a new certificate rolls them).
WEBHOOK_CERTIFICATE_ANNOTATION = "gpu-tenancy/webhook-certificate"
# On HAMi's scheduler pods: a digest of the files the stack gives it beside that certificate.
DEVICE_CONFIG_ANNOTATION = "gpu-tenancy/scheduler-files"


def release_controller_container(lab: str, tenant: str) -> str:
    """Docker name of a tenant's release controller container."""
    return f"{lab}-{tenant}-releaser"


def workload_resource(tenant: str, namespace: str, name: str) -> str:
    """Pulumi name of a declared workload's component; the config checks it is unique in the stack."""
    return f"{tenant}-{namespace}-{name}"


def kwok_name(lab: str, tenant: str) -> str:
    """Docker name of a tenant's KWOK container (its token keeper: `<name>-token-keeper`)."""
    return f"{lab}-{tenant}-kwok"


def tokens_volume(container: str) -> str:
    """Docker volume where a controller's renewed token outlives its container."""
    return f"{container}-tokens"


def worker_name(cluster: str, tenant: str, pool: str, index: int) -> str:
    """Container, hostname and Node name of a pool's node; the config checks that they are unique
    across pools and tenants (the default docker pool is named `worker`)."""
    return f"{cluster}-{tenant}-{pool}-{index}"


# On every node the stack makes: its pool's name and mode (external machines get them from
# their join configuration).
POOL_LABEL = "gpu-tenancy/pool"
POOL_MODE_LABEL = "gpu-tenancy/pool-mode"


# On a node with cards: their model (catalogue key), for a nodeSelector beside HAMi's own types.
GPU_MODEL_LABEL = "gpu-tenancy/gpu-model"


def gpu_model_label(model: GpuModel) -> dict[str, str]:
    return {GPU_MODEL_LABEL: model.key}


def pool_labels(tenant: str, pool: str, mode: str) -> dict[str, str]:
    """The labels every node of a pool carries, whatever makes the node."""
    return {TENANT_LABEL: tenant, POOL_LABEL: pool, POOL_MODE_LABEL: mode}


# Where the HAMi chart goes in each tenant.
HAMI_NAMESPACE = "hami-system"
# Namespaces a workload may not use: Kubernetes' own (Kamaji's add-ons live there) and HAMi's.
RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", HAMI_NAMESPACE)


def tenant_provider(tenant: str) -> str:
    """Resource name of the tenant's Kubernetes provider (on the automation identity)."""
    return f"{tenant}-cp-k8s"


def bootstrap_provider(tenant: str) -> str:
    """Resource name of the provider on the tenant's super-admin, which only makes the automation identity."""
    return f"{tenant}-bootstrap-k8s"


# The stack's own identity inside each tenant (kube-system), bound to cluster-admin.
AUTOMATION_ACCOUNT = "gpu-tenancy-automation"


# On a workload declared with failOnPending: false (the pack then leaves it out of the fit).
FAIL_ON_PENDING_ANNOTATION = "gpu-tenancy/fail-on-pending"
# On an object the pack cannot count (a CustomResource, a Helm release's values): the GPU totals
# it runs at most at once, JSON {"gpus": N, "gpumemMb": N, "gpucoresPercent": N}.
DECLARED_USAGE_ANNOTATION = "gpu-tenancy/gpu-usage"


# On the namespaces that hold a share of a tenant's GPU budget; GPU pods elsewhere are refused.
GPU_BUDGET_LABEL = ("gpu-tenancy/gpu-budget", "true")


# The management cluster's namespaces of a tenant: its TenantControlPlane (where Kamaji keeps the
# control plane's certificates and datastore credentials), and its simulated-node controller
# (KWOK runs pods, so it must not share a namespace with those Secrets).
def tenant_namespace(tenant: str) -> str:
    return f"tenant-{tenant}"


def admin_kubeconfig_secret(tenant: str) -> str:
    """Kamaji's Secret with the TenantControlPlane's kubeconfigs (`<tcp>-admin-kubeconfig`)."""
    return f"{tenant}-admin-kubeconfig"


# A team's identity in the management cluster (a ServiceAccount in its tenant namespace).
TEAM_ACCOUNT = "gpu-tenancy-team"
# What the platform publishes for a team, in its tenant namespace (components.kube.platform_record).
PLATFORM_RECORD = "gpu-tenancy-platform"


def team_account_user(team: str) -> str:
    """The API server's user name for a team's identity (what admission rules match on)."""
    return f"system:serviceaccount:{tenant_namespace(team)}:{TEAM_ACCOUNT}"


def team_datastore(team: str) -> str:
    """A team's own Kamaji DataStore on a platform, its etcd's Helm release and namespace."""
    return f"etcd-{team}"


def datastore_schema(project: str, stack: str, tenant: str) -> str:
    """A lab tenant's etcd key prefix and user; immutable in Kamaji, so derived from stable names
    only. Tenant names are unique within a stack, and a lab's DataStore is its own."""
    return f"{project}_{stack}_{tenant}".replace("-", "_")
