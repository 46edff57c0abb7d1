"""What the platform publishes for one team, in the team's own namespace of the management cluster,
and how a team stack reads it with its own token.

A team stack needs a few facts of the platform (where its lab is, the Docker network, the DataStore
and etcd keys its control plane must name, the registry mirror, its reserved NodePorts). They are
published as a ConfigMap the team's ServiceAccount may read and not write: the team stack reads them
with the token the platform owner granted, never through the platform's state (which would need the
state's passphrase, and that also decrypts the management cluster's admin kubeconfig).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields

from components.domain.names import PLATFORM_RECORD, tenant_namespace
from components.kube.client import core_api, get_json, http_status, token_kubeconfig


class PlatformUnreadable(Exception):
    """The team's token cannot read its platform record (or the record is not one)."""


def _key(field: str) -> str:
    """A field's ConfigMap key, in Kubernetes' spelling (api_port: apiPort)."""
    first, *rest = field.split("_")
    return first + "".join(word.capitalize() for word in rest)


@dataclass(frozen=True)
class PlatformRecord:
    """One team's view of the platform (the ConfigMap's keys are these fields' names, camelCase)."""

    team: str
    # The lab's name, its management node's address and the Docker network its workers join.
    lab: str
    address: str
    network: str
    # The Kamaji DataStore the team's control plane must name, and its etcd prefix and user.
    datastore: str
    schema: str
    # The NodePorts the platform's registry reserved for the team.
    api_port: int
    konnectivity_port: int
    # The lab's registry mirror ("" for none).
    mirror: str = ""

    def data(self) -> dict[str, str]:
        """The ConfigMap's data (strings only)."""
        return {_key(k): str(v) for k, v in asdict(self).items()}

    @classmethod
    def from_data(cls, data: dict[str, str], where: str) -> PlatformRecord:
        """The record a ConfigMap's data holds, or PlatformUnreadable naming what is missing."""
        missing = [_key(f.name) for f in fields(cls) if _key(f.name) not in data and f.default is MISSING]
        if missing:
            raise PlatformUnreadable(
                f"{where} lacks {', '.join(missing)}: the platform stack that wrote it is older than this "
                "program (run `pulumi up` on the platform stack first)"
            )
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = data.get(_key(f.name), "")
            if f.type == "int":
                try:
                    values[f.name] = int(raw)
                except ValueError:
                    raise PlatformUnreadable(f"{where}: {_key(f.name)} is {raw!r}, not a port") from None
            else:
                values[f.name] = raw
        return cls(**values)  # type: ignore[arg-type]


def read_platform_record(server: str, ca_data: str, token: str, team: str) -> PlatformRecord:
    """The platform's record for `team`, read with the team's own token; PlatformUnreadable in one
    line naming the namespace when the token cannot read it."""
    namespace = tenant_namespace(team)
    where = f"ConfigMap {PLATFORM_RECORD} in namespace {namespace} of the management cluster ({server})"
    core = core_api(token_kubeconfig(server, ca_data, token))
    try:
        answer = get_json(core.read_namespaced_config_map, PLATFORM_RECORD, namespace)
    except Exception as exc:
        status = http_status(exc)
        if status in (401, 403):
            why = (
                "the token was refused (expired, revoked, or not this cluster's)"
                if status == 401
                else f"the token may not read it: it is not team {team}'s, or {team} is not in the platform's "
                "teams registry"
            )
        elif status == 404:
            why = f"it does not exist: is {team} in the platform stack's teams registry, and that stack up?"
        elif status is None:
            why = f"the management cluster did not answer ({type(exc).__name__})"
        else:
            why = f"the API server answered {status}"
        raise PlatformUnreadable(
            f"cannot read {where}: {why}; the platform owner grants it with scripts/grant-team.sh {team}"
        ) from None
    return PlatformRecord.from_data(answer.get("data") or {}, where)
