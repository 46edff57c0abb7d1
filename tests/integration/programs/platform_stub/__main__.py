"""Platform-role test program: what the real platform stack makes for its teams (TeamAccess per
registered team) and exports (platform_outputs), for an adopted management cluster (the test's
kube-apiserver); Docker and Kamaji are left out."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.platform.platform_link import platform_outputs
from components.platform.team_access import TeamAccess, TeamAccessArgs

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {"role": "platform", "cluster": config.require_object("cluster"), "teams": config.require_object("teams")},
)
kubeconfig = config.require_secret("kubeconfig")
provider = k8s.Provider("management", kubeconfig=kubeconfig)
for slot in cfg.teams:
    TeamAccess(
        f"team-{slot.name}",
        TeamAccessArgs(team=slot, datastore="default", project="gpu-tenancy"),
        opts=pulumi.ResourceOptions(provider=provider),
    )
pulumi.export("platform", platform_outputs(kubeconfig, "lab-net", cfg, "default"))
