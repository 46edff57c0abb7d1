"""ReleaseController: the tenant's release controller, running with the lab.

A container on the lab's Docker network (from ReleaseControllerImage), restarted by Docker if it dies
(the controller exits once it has itself been unhealthy for a while: its watch, workers or queue),
removed on destroy. It authenticates as its own ServiceAccount, limited to what the controller
does (release.policy.rbac_rules), and admission policies narrow its writes to removing HAMi's
node lock, setting bind-phase success, its own Events about stuck pods and making the stack's bare
pods again once a kubelet refused them at admission (release.policy); that
token's kubeconfig reaches the container only as an uploaded file, from a Pulumi secret: never on
a command line or in an environment variable. Docker keeps uploaded files in the container's layer
in the engine's storage on the host, and the renewed token in a Docker volume there too
(TOKEN_DIR, so a replaced container goes on with it): root on the host reads both, as it can
use the Docker socket. The token is bound and expiring; the controller renews it itself.
Logs: `docker logs <lab>-<tenant>-releaser`; metrics and health on the container's
loopback only, port 9400 (the lab's network reaches every tenant's workers): read them with
`docker exec <lab>-<tenant>-releaser python -m components.controllers.release.scrape [/healthz]` (the
`releaseController.metrics` stack output). A pod whose release keeps failing is reported (an Event
on it, gpu_tenancy_pods_stuck), never a reason to restart the controller.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.controllers.release import policy as release_policy
from components.controllers.release.policy import rbac_rules
from components.domain.names import TENANT_LABEL, release_controller_container, tokens_volume
from components.tenant.service_account import NAMESPACE, scoped_kubeconfig

SERVICE_ACCOUNT = "gpu-tenancy-releaser"
# Its memory cap (and swap: none beyond it), so one tenant's controller cannot take the host's
# memory from the others: measured at 69 MiB resident, idle and releasing (bench/kube_client.py);
# it keeps only the pods worth handling, not every pod of the tenant.
MEMORY_MIB = 256
KUBECONFIG_PATH = "/run/secrets/gpu-tenancy/kubeconfig"
# The image's --token-file lives here (Dockerfile).
TOKEN_DIR = "/var/lib/gpu-tenancy"
# The image runs as nobody (Dockerfile USER); the kubeconfig is readable by it alone. The container
# names that user again, as a bare uid: an upload with an owner makes Docker resolve the container's
# user with the *host's* passwd database (getent), where "65534:65534" (the image's form) is no entry
# and the upload fails; a bare uid resolves on any host that has it (nobody, 65534, nearly everywhere).
RUN_AS = "65534"
# Prints the controller's /metrics from inside its container (the stack's `metrics` output).
SCRAPE = "python -m components.controllers.release.scrape"


TYPE = "gpu-tenancy:index:ReleaseController"
PREVIOUS_TYPE = "gpu-tenancy:index:LockReleaser"


@dataclass
class ReleaseControllerArgs:
    tenant: str
    lab_name: str
    network: pulumi.Input[str]
    image: pulumi.Input[str]
    # The tenant API server as the lab's Docker network reaches it.
    server: str
    # Used once, to read the ServiceAccount's token; the container never sees it.
    admin_kubeconfig: pulumi.Input[str]
    # The stack's bare pods (NAMESPACE/NAME) the controller makes again when a restarted worker's
    # kubelet refuses them at admission (components.controllers.release.readmit); none: it creates no pod.
    readmit: tuple[str, ...] = ()


class ReleaseController(pulumi.ComponentResource):
    """The controller's identity and write policies in the tenant (option `provider`: the
    tenant's), and its container on the lab's host."""

    container: docker.Container
    metrics_url: pulumi.Output[str]

    def __init__(self, name: str, args: ReleaseControllerArgs, opts: pulumi.ResourceOptions | None = None):
        # Stacks made before the rename hold it as LockReleaser: the alias keeps them (no replace).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=PREVIOUS_TYPE)]))
        super().__init__(TYPE, name, None, opts)
        kubeconfig = scoped_kubeconfig(
            name,
            account=SERVICE_ACCOUNT,
            rules=rbac_rules(args.readmit),
            server=args.server,
            admin_kubeconfig=args.admin_kubeconfig,
            parent=self,
        )
        on_tenant = pulumi.ResourceOptions(parent=self)
        self.policies = []
        for spec in release_policy.write_policies(f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}", args.readmit):
            policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{spec['metadata']['name']}",
                metadata=spec["metadata"],
                spec=spec["spec"],
                opts=on_tenant,
            )
            bound = release_policy.binding(spec)
            self.policies.append(
                k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                    f"{name}-{spec['metadata']['name']}-binding",
                    metadata=bound["metadata"],
                    spec=bound["spec"],
                    opts=pulumi.ResourceOptions.merge(on_tenant, pulumi.ResourceOptions(depends_on=[policy])),
                )
            )
        container_name = release_controller_container(args.lab_name, args.tenant)
        self.tokens = docker.Volume(
            f"{name}-tokens",
            name=tokens_volume(container_name),
            labels=[docker.VolumeLabelArgs(label=TENANT_LABEL, value=args.tenant)],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.container = docker.Container(
            f"{name}-container",
            name=container_name,
            image=args.image,
            restart="unless-stopped",
            user=RUN_AS,
            # After the image's entrypoint: the pods to make again.
            command=[arg for pod in sorted(args.readmit) for arg in ("--readmit", pod)] or None,
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            uploads=[
                docker.ContainerUploadArgs(
                    file=KUBECONFIG_PATH, content=kubeconfig, owner=RUN_AS, group=RUN_AS, permissions="0400"
                )
            ],
            volumes=[docker.ContainerVolumeArgs(volume_name=self.tokens.name, container_path=TOKEN_DIR)],
            labels=[docker.ContainerLabelArgs(label=TENANT_LABEL, value=args.tenant)],
            memory=MEMORY_MIB,
            memory_swap=MEMORY_MIB,
            must_run=True,
            # `up` waits for the image's HEALTHCHECK: the controller listed the tenant's pods.
            wait=True,
            wait_timeout=120,
            # A fixed container name cannot exist twice: the old one goes first. Its writes are
            # narrowed before it starts.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=self.policies),
        )
        # The controller listens on the container's loopback only (the lab's network reaches every
        # tenant's workers): its metrics are read from inside the container.
        self.metrics_url = self.container.name.apply(lambda container: f"docker exec {container} {SCRAPE}")
        self.register_outputs({"container": self.container.name, "metrics": self.metrics_url})
