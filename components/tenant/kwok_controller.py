"""KwokController: KWOK for one tenant's kwok pools, in the management cluster beside the
tenant's control plane.

It needs only the tenant API server, so it runs where the control plane runs, not on a worker:
a Deployment (one replica, Recreate: two controllers would fight over the same nodes) in the
tenant's namespace, with a kubeconfig for a ServiceAccount limited to what KWOK does
(KWOK_RBAC_RULES), mounted from a Secret. Removed with the tenant.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config import versions
from components.config.names import TENANT_LABEL, simulation_secret
from components.ops.simulated_nodes import KWOK_PORT, KWOK_RBAC_RULES, NODE_STAGES, kwok_args
from components.tenant.service_account import scoped_kubeconfig

SERVICE_ACCOUNT = "gpu-tenancy-kwok"
MOUNT = "/etc/gpu-tenancy"


@dataclass
class KwokControllerArgs:
    tenant: str
    # The tenant's namespace in the management cluster (the control plane's).
    namespace: pulumi.Input[str]
    # The tenant API server as the management cluster's pods reach it.
    server: str
    pod_cidr: str
    tenant_provider: k8s.Provider
    management_provider: k8s.Provider
    admin_kubeconfig: pulumi.Input[str]


class KwokController(pulumi.ComponentResource):
    deployment: k8s.apps.v1.Deployment

    def __init__(self, name: str, args: KwokControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:KwokController", name, None, opts)
        kubeconfig = scoped_kubeconfig(
            name,
            account=SERVICE_ACCOUNT,
            rules=KWOK_RBAC_RULES,
            server=args.server,
            provider=args.tenant_provider,
            admin_kubeconfig=args.admin_kubeconfig,
            parent=self,
        )
        on_management = pulumi.ResourceOptions(parent=self, provider=args.management_provider)
        labels = {"app.kubernetes.io/name": "kwok", TENANT_LABEL: args.tenant}
        secret = k8s.core.v1.Secret(
            f"{name}-kubeconfig",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=simulation_secret(args.tenant), namespace=args.namespace, labels=labels
            ),
            # its node stages beside the kubeconfig: one volume, both read at start
            string_data={"kubeconfig": kubeconfig, "stages.yaml": NODE_STAGES},
            opts=on_management,
        )
        probe = k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path="/healthz", port=KWOK_PORT), period_seconds=10
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=simulation_secret(args.tenant), namespace=args.namespace, labels=labels
            ),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        automount_service_account_token=False,
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="kwok",
                                image=versions.KWOK_IMAGE,
                                args=kwok_args(f"{MOUNT}/kubeconfig", args.pod_cidr, f"{MOUNT}/stages.yaml"),
                                ports=[k8s.core.v1.ContainerPortArgs(name="http", container_port=KWOK_PORT)],
                                readiness_probe=probe,
                                liveness_probe=probe,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "1Gi"}
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(allow_privilege_escalation=False),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(name="kubeconfig", mount_path=MOUNT, read_only=True)
                                ],
                            )
                        ],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="kubeconfig",
                                secret=k8s.core.v1.SecretVolumeSourceArgs(secret_name=secret.metadata.name),
                            )
                        ],
                    ),
                ),
            ),
            opts=on_management,
        )
        self.register_outputs({"deployment": self.deployment.metadata.name})
