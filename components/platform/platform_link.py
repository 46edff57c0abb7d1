"""PlatformLink: the shared platform as a team stack sees it, read from the management cluster.

A team stack creates no cluster and no Kamaji. It reaches the management cluster with its team's own
grant (secret config `managementToken`, a TeamAccess ServiceAccount's bound token; `managementServer`
and `managementCa`, where the API server is), never the admin and never the platform's state: what
it needs of the platform (lab, network, DataStore, etcd keys, mirror, reserved ports) is the record
the platform publishes in the team's own namespace (components.kube.platform_record), readable with
that token and writable only by the platform. Before anything reaches the management cluster, the
stack checks that its tenant is the one the platform reserved for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config.model import MANAGEMENT_TOKEN_KEY, MirrorConfig, StackConfig, TeamSlot
from components.domain.names import TEAM_ACCOUNT
from components.kube import platform_record
from components.kube.client import token_kubeconfig
from components.kube.platform_record import PlatformRecord, PlatformUnreadable
from components.kube.team_token import token_seconds_left

RENEW_WARNING_SECONDS = 7 * 24 * 3600


def published_record(slot: TeamSlot, cfg: StackConfig, network: str) -> PlatformRecord:
    """What the platform publishes for one registered team (one place for its facts)."""
    return PlatformRecord(
        team=slot.name,
        lab=cfg.cluster.name,
        address=str(cfg.cluster.management_ip),
        network=network,
        datastore=slot.datastore,
        schema=slot.datastore_schema(cfg.project),
        api_port=slot.api_port,
        konnectivity_port=slot.konnectivity_port,
        mirror=cfg.mirror.endpoint if cfg.mirror else "",
    )


def record_problems(record: PlatformRecord, cfg: StackConfig, api_port: int, konnectivity_port: int) -> list[str]:
    """Why a team stack's tenant does not match what the platform published for it (empty: it does).

    Two team stacks can then never take the same ports, names or Docker containers on the platform."""
    problems = []
    if cfg.cluster.name != record.lab:
        problems.append(f"cluster.name is {cfg.cluster.name!r} but the platform's lab is {record.lab!r}")
    if str(cfg.cluster.management_ip) != record.address:
        problems.append(
            f"cluster.managementIp is {str(cfg.cluster.management_ip)!r} but the platform's is {record.address!r}"
        )
    for key, mine, reserved in (
        ("apiPort", api_port, record.api_port),
        ("konnectivityPort", konnectivity_port, record.konnectivity_port),
    ):
        if mine != reserved:  # a team stack holds one tenant: tenants[0]
            problems.append(f"tenants[0].{key} is {mine} but the platform reserved {reserved} for {record.team!r}")
    problems += _mirror_problems(cfg.mirror, record.mirror or None)
    return problems


def _mirror_problems(mirror: MirrorConfig | None, theirs: str | None) -> list[str]:
    mine = mirror.endpoint if mirror else None
    if theirs == mine:
        return []
    if theirs:
        return [f"mirror.endpoint is {mine!r} but the platform's lab pulls through {theirs!r}: the lab has one mirror"]
    return [f"mirror.endpoint is {mine!r} but the platform's lab has no mirror: unset it, or give the platform one"]


def checked_token(token: str) -> str:
    """The team's token, or a plain error when it has expired (its owner renews it)."""
    left = token_seconds_left(token)
    if left is not None and left <= 0:
        raise pulumi.RunError(
            f"{MANAGEMENT_TOKEN_KEY} expired {-left // 3600} h ago: ask the platform owner to renew it "
            "(scripts/grant-team.sh <team>)"
        )
    if left is not None and left < RENEW_WARNING_SECONDS:
        pulumi.log.warn(f"{MANAGEMENT_TOKEN_KEY} expires in {left // 3600} h: renew it with scripts/grant-team.sh")
    return token


def read_records(cfg: StackConfig, token: str) -> dict[str, PlatformRecord]:
    """Each tenant's platform record, read with the team's token and checked against the stack; a
    RunError in one line otherwise."""
    server, ca = cfg.management_server, cfg.management_ca
    if server is None or ca is None:
        raise ValueError("a PlatformLink needs the team stack's managementServer and managementCa")
    records: dict[str, PlatformRecord] = {}
    problems: list[str] = []
    for t in cfg.tenants:
        try:
            record = platform_record.read_platform_record(server, ca, checked_token(token), t.name)
        except PlatformUnreadable as exc:
            raise pulumi.RunError(str(exc)) from None
        problems += record_problems(record, cfg, t.api_port, t.konnectivity_port)
        records[t.name] = record
    if problems:
        raise pulumi.RunError(f"this team stack does not match its platform ({server}): " + "; ".join(problems))
    return records


@dataclass
class PlatformLinkArgs:
    config: StackConfig
    # The team's management-cluster token (secret config managementToken).
    token: pulumi.Input[str]


class PlatformLink(pulumi.ComponentResource):
    """The platform's records for this stack's tenants + a management Provider on the team's token.

    A team stack holds one tenant (its token reaches that team's namespace only); more tenants would
    each need a readable record, and the first unreadable one stops the stack naming its namespace."""

    provider: k8s.Provider
    network: pulumi.Output[str]

    def __init__(self, name: str, args: PlatformLinkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:index:PlatformLink", name, None, opts)
        cfg = args.config
        token = pulumi.Output.from_input(args.token)
        self._records = token.apply(lambda tok: read_records(cfg, tok))
        self.network = self._field(lambda r: r.network)
        # Built once the records are read and match: nothing reaches the cluster before that.
        kubeconfig = pulumi.Output.all(self._records, token).apply(
            lambda a: token_kubeconfig(str(cfg.management_server), str(cfg.management_ca), a[1], TEAM_ACCOUNT)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=pulumi.Output.secret(kubeconfig), opts=pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"network": self.network})

    def _field(self, pick: Callable[[PlatformRecord], str], tenant: str | None = None) -> pulumi.Output[str]:
        """One published fact of a tenant's record (or of any: the platform's own facts are the same
        in each), not secret: the records are read with a secret, but hold none."""

        def fact(records: dict[str, PlatformRecord]) -> str:
            record = records.get(tenant) if tenant else next(iter(records.values()), None)
            return pick(record) if record else ""

        return pulumi.Output.unsecret(self._records.apply(fact))

    def datastore(self, tenant: str) -> pulumi.Output[str]:
        """The DataStore the platform named for a tenant of this stack."""
        return self._field(lambda r: r.datastore, tenant)

    def schema(self, tenant: str) -> pulumi.Output[str]:
        """The etcd keys the platform named for a tenant of this stack."""
        return self._field(lambda r: r.schema, tenant)
