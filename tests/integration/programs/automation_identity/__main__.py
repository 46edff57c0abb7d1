"""Tenant-level test program: the project's AutomationIdentity against a real API server (whose
system:masters kubeconfig stands in for Kamaji's super-admin.conf), and one object made through
the provider it yields. `renewBeforeSeconds` lets the test put the token in its renewal window."""

import pulumi
import pulumi_kubernetes as k8s

from components.kube.client import cluster_server
from components.tenant.automation_identity import AutomationIdentity

config = pulumi.Config()
kubeconfig = config.require_secret("kubeconfig")
identity = AutomationIdentity(
    "team-a-cp-automation",
    super_admin=kubeconfig,
    endpoint=config.require("endpoint"),
    bootstrap_provider_name="team-a-bootstrap-k8s",
    provider_name="team-a-cp-k8s",
    token_seconds=3600,
    renew_before_seconds=config.get_int("renewBeforeSeconds") or 600,
)
k8s.core.v1.ConfigMap(
    "made-by-automation",
    metadata={"name": "made-by-automation", "namespace": "default"},
    data={"by": "automation"},
    opts=pulumi.ResourceOptions(provider=identity.provider),
)
pulumi.export("kubeconfig", identity.kubeconfig)
pulumi.export("expires", identity.token.expires)
pulumi.export("server", kubeconfig.apply(cluster_server))
