"""A platform's registered teams: per team, its own etcd and DataStore, its access to the
management cluster, and the record the team stack reads, in the order removal needs.

Made in this order: the team's etcd (TeamDataStore), then its access (TeamAccess: namespace,
identity, policy held to that DataStore, the published record; the team's Role is bound last),
then the DataStore's teardown. Removed the other way round: the teardown first, which refuses
while the team's control plane still uses the DataStore, so a team dropped from the registry
while its stack is up loses nothing, and says so; then its namespace, then its etcd.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config.chart_sources import ChartSource
from components.config.model import StackConfig
from components.platform.platform_link import published_record
from components.platform.team_access import TeamAccess, TeamAccessArgs
from components.platform.team_datastore import TeamDataStore, TeamDataStoreArgs


@dataclass
class RegisteredTeam:
    datastore: TeamDataStore
    access: TeamAccess


def register_teams(
    cfg: StackConfig,
    network: pulumi.Input[str],
    kubeconfig: pulumi.Input[str],
    etcd_chart: ChartSource | None,
    opts: pulumi.ResourceOptions,
) -> list[RegisteredTeam]:
    """Each registered team's parts; `opts`: the management cluster's provider, and Kamaji's
    release (its CRDs and webhooks) in `depends_on`."""
    teams = []
    for slot in cfg.teams:
        store = TeamDataStore(
            f"team-{slot.name}-etcd", TeamDataStoreArgs(team=slot, kubeconfig=kubeconfig, chart=etcd_chart), opts=opts
        )
        record = pulumi.Output.from_input(network).apply(lambda n, slot=slot: published_record(slot, cfg, n).data())
        access = TeamAccess(
            f"team-{slot.name}",
            TeamAccessArgs(team=slot, project=cfg.project, record=record),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[store.release])),
        )
        store.guard([access])
        teams.append(RegisteredTeam(store, access))
    return teams
