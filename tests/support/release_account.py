"""The release controller's identity in a test cluster, as the stack makes it in a tenant: its
ServiceAccount, its RBAC (release.policy.rbac_rules), the renewal of its own token, and its write
policies, waited for until the API server enforces them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client

from components.controllers.release import policy as release_policy
from components.kube.bound_token import self_renewal_rules
from components.kube.client import cluster_ca, core_api, token_kubeconfig
from tests.support.cluster import TestCluster, add_node
from tests.support.waits import settles

ACCOUNT, NAMESPACE = "gpu-tenancy-releaser", "kube-system"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"


@contextmanager
def release_account(cluster: TestCluster, server: str, readmit: tuple[str, ...] = ()) -> Iterator[str]:
    """A kubeconfig for `server` with the account's token (an hour); the policies are removed after."""
    core = cluster.core()
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": ACCOUNT}})
    rules = release_policy.rbac_rules(readmit)
    rbac.create_cluster_role({"metadata": {"name": ACCOUNT}, "rules": [dict(r) for r in rules]})
    subjects = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ACCOUNT},
            "subjects": subjects,
        }
    )
    renewal = f"gpu-tenancy:{ACCOUNT}:renewal"
    rbac.create_namespaced_role(NAMESPACE, {"metadata": {"name": renewal}, "rules": self_renewal_rules(ACCOUNT)})
    rbac.create_namespaced_role_binding(
        NAMESPACE,
        {
            "metadata": {"name": renewal},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": renewal},
            "subjects": subjects,
        },
    )
    policies = release_policy.write_policies(USER, readmit)
    for policy in policies:
        admission.create_validating_admission_policy(policy)
        admission.create_validating_admission_policy_binding(release_policy.binding(policy))
    token = core.create_namespaced_service_account_token(
        ACCOUNT, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    ca = cluster_ca(cluster.kubeconfig_text)
    as_releaser = core_api(token_kubeconfig(f"https://{cluster.endpoint}", ca, token))
    # The policies take a moment to be enforced: wait until a label change is refused.
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    add_node(cluster, probe)

    def enforced() -> bool:
        try:
            as_releaser.patch_node(probe, {"metadata": {"labels": {"x": "y"}}}, dry_run="All")
        except client.ApiException as exc:
            if exc.status == 422:
                return True
            raise
        return False

    assert settles(enforced, timeout=30, interval=0.2), "the write policies were never enforced"
    core.delete_node(probe)
    try:
        yield token_kubeconfig(server, ca, token)
    finally:
        for policy in policies:
            name = policy["metadata"]["name"]
            admission.delete_validating_admission_policy_binding(name)
            admission.delete_validating_admission_policy(name)
