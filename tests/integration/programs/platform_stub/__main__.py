"""Platform-role test program: what the real platform stack makes for its teams (TeamAccess per
registered team, held to the team's own DataStore, with the record it publishes in the team's
namespace), for an adopted management cluster (the test's kube-apiserver); Docker, Kamaji and the
teams' etcds are left out (the DataStores are only named)."""

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.platform.platform_link import published_record
from components.platform.team_access import TeamAccess, TeamAccessArgs

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {"role": "platform", "cluster": config.require_object("cluster"), "teams": config.require_object("teams")},
)
provider = k8s.Provider("management", kubeconfig=config.require_secret("kubeconfig"))
for slot in cfg.teams:
    TeamAccess(
        f"team-{slot.name}",
        TeamAccessArgs(
            team=slot,
            project="gpu-tenancy",
            record=published_record(slot, cfg, "lab-net").data(),
        ),
        opts=pulumi.ResourceOptions(provider=provider),
    )
