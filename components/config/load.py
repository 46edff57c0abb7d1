"""Reading the stack config: each section on its own (every problem found in one pass), then
the checks across fields. `load_config` is the one way a stack's config is read: by `up`
(from Pulumi's config) and by the offline tools (from a stack file, `load_stack_file`); the
policy pack reads its tenants with `load_tenants`, from the same model, with the same defaults.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from pathlib import Path

from components.config import chart_sources
from components.config.chart_sources import ChartSource, ChartSourceError
from components.config.checks import tenant_checks, unique
from components.config.fields import base64_pem_problem, https_url_problem
from components.config.model import (
    CHARTS,
    GRANT_KEYS,
    MANAGEMENT_CA_KEY,
    MANAGEMENT_SERVER_KEY,
    MANAGEMENT_TOKEN_KEY,
    MODE_KUBECONFIG,
    NOT_READ,
    ROLE_LAB,
    ROLE_PLATFORM,
    ROLE_TEAM,
    ROLES,
    ChartsConfig,
    ClusterConfig,
    HamiConfig,
    ImagesConfig,
    MirrorConfig,
    StackConfig,
    TeamSlot,
    TenantConfig,
)
from components.config.problems import Collector, ConfigError, read_section
from components.config.stack_file import StackFileError, read_document
from components.domain.names import tenant_namespace


def _tenants(project: str, raw: object, cluster: ClusterConfig | None, c: Collector) -> list[TenantConfig]:
    if not isinstance(raw, list | tuple) or not raw:
        c.fail("tenants", "is required: a non-empty list of tenants")
        return []
    found: list[tuple[int, TenantConfig]] = []
    clean: list[tuple[int, TenantConfig]] = []  # valid on their own: their node names can be compared
    # A tenant refused for one field still holds its name and ports: they are compared too, so a
    # clash is reported in the same run as the field.
    identities: list[tuple[str, str, int | None, int | None]] = []
    for i, item in enumerate(raw):
        if isinstance(item, Mapping) and not item:
            c.fail(f"tenants[{i}]", "is empty; a tenant needs at least a name, a gpu model and a quota")
            continue
        if isinstance(item, Mapping) and "workers" in item:
            c.fail(
                f"tenants[{i}].workers",
                "is replaced by pools: write pools: [{name: worker, mode: docker, nodes: "
                f"{item['workers']!r}}}] (the same nodes, names unchanged)",
            )
            item = {k: v for k, v in item.items() if k != "workers"}
        t = read_section(TenantConfig, item, ("tenants", i), project, c.problems)
        if t is None:
            if identity := _raw_identity(item, i):
                identities.append(identity)
            continue
        t = t.model_copy(
            update={
                "api_port": t.api_port if t.api_port is not None else 31443 + i,
                "konnectivity_port": t.konnectivity_port if t.konnectivity_port is not None else 31132 + i,
            }
        )
        before = len(c.problems)
        tenant_checks(t, i, cluster, c)
        found.append((i, t))
        if len(c.problems) == before:
            clean.append((i, t))
    identities += [(f"tenants[{i}]", t.name, t.api_port, t.konnectivity_port) for i, t in found]
    unique(c, sorted(identities, key=lambda e: int(e[0][len("tenants[") : -1])), "tenant")
    if len({t.name for _, t in found}) == len(found):
        _unique_made_names(clean, cluster.name if cluster else "", c)
    return [t for _, t in found]


def _raw_identity(item: object, i: int) -> tuple[str, str, int | None, int | None] | None:
    """(path, name, apiPort, konnectivityPort) as a refused tenant's raw entry gives them (the
    defaults where absent), or None when its name is not even a string."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        return None

    def port(key: str, default: int) -> int | None:
        value = item.get(key, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return (f"tenants[{i}]", item["name"], port("apiPort", 31443 + i), port("konnectivityPort", 31132 + i))


def _subnet_room(cluster: ClusterConfig, tenants: list[TenantConfig], c: Collector) -> None:
    """Docker gives each container of the lab an address of `cluster.subnet`: besides its network
    and broadcast addresses, the gateway and the management cluster, one per container."""
    net = ipaddress.IPv4Network(cluster.subnet)
    free = max(0, net.num_addresses - 4)
    wanted = sum(t.lab_containers for t in tenants)
    if wanted > free:
        need = 32 - (wanted + 4 - 1).bit_length()
        c.fail(
            "cluster.subnet",
            f"{cluster.subnet} has {free} address(es) for containers after the gateway and the management "
            f"cluster; the tenants run {wanted} (workers, release controllers, KWOK); use a /{need} or larger",
        )


def _unique_made_names(tenants: list[tuple[int, TenantConfig]], lab: str, c: Collector) -> None:
    """Every name the stack derives (containers, Nodes, workload resources) made once: else the
    second create fails at apply, or two resources share a URN."""
    owner: dict[tuple[str, str], str] = {}
    failed: set[str] = set()
    for i, t in tenants:
        for what, name, key in t.made_names(lab):
            where = f"tenants[{i}].{key}"
            mine = owner.setdefault((what, name), where)
            if mine != where and where not in failed:
                c.fail(where, f"{what} name {name!r} is also made by {mine}; rename one of them")
                failed.add(where)


def load_tenants(project: str, raw: object, cluster: Mapping[str, object] | None = None) -> list[TenantConfig]:
    """Tenants alone (the policy pack's view): the same model, defaults and checks."""
    c = Collector(project)
    cl = read_section(ClusterConfig, cluster, ("cluster",), project, c.problems)
    tenants = _tenants(project, raw, cl, c)
    if c.problems:
        raise ConfigError(c.problems)
    return tenants


def _mirror(project: str, raw: object, c: Collector) -> MirrorConfig | None:
    if raw is None:
        return None
    mirror = read_section(MirrorConfig, raw, ("mirror",), project, c.problems)
    if mirror is not None and mirror.ca_cert and not mirror.endpoint.startswith("https://"):
        c.fail("mirror.caCert", f"is read only over https; the endpoint {mirror.endpoint} is plain http")
    return mirror


def _charts(project: str, raw: object, base: Path, c: Collector) -> dict[str, ChartSource]:
    """Each chart's source, checked against the chart the stack pins (a directory is read)."""
    given = read_section(ChartsConfig, raw, ("charts",), project, c.problems)
    sources: dict[str, ChartSource] = {}
    for key, (chart, version, repo) in CHARTS.items():
        value = given.model_dump(by_alias=True).get(key) if given is not None else None
        try:
            sources[key] = (
                chart_sources.repository(chart, version, repo)
                if value is None
                else chart_sources.parse(value, chart, version, base)
            )
        except ChartSourceError as exc:
            c.fail(f"charts.{key}", str(exc))
    return sources


def _closed_network(
    project: str, raw: Mapping[str, object], base: Path, c: Collector
) -> tuple[MirrorConfig | None, ImagesConfig, dict[str, ChartSource]]:
    mirror = _mirror(project, raw.get("mirror"), c)
    images = read_section(ImagesConfig, raw.get("images"), ("images",), project, c.problems)
    charts = _charts(project, raw.get("charts"), base, c)
    if mirror is not None and mirror.ca_cert:
        for key, source in charts.items():
            if source.kind == chart_sources.OCI and source.chart.startswith(f"oci://{mirror.host}/"):
                c.warnings.append(
                    f"charts.{key}: Helm pulls OCI charts trusting only the system's CAs, not mirror.caCert: run "
                    "pulumi with SSL_CERT_FILE naming a bundle that holds it"
                )
    return mirror, images, charts


def closed_network_problems(project: str, raw: Mapping[str, object], base: Path) -> list[str]:
    """`<key>: <why>` for each problem of the `mirror`, `images` and `charts` keys: the policy
    pack's words, the same as load_stack_config's."""
    c = Collector(project)
    _closed_network(project, raw, base, c)
    return [f"{key}: {msg}" for key, msg in c.problems]


def load_stack_config(
    project: str,
    raw: Mapping[str, object],
    kubeconfig_given: bool = False,
    management_token_given: bool = False,
    base: Path | None = None,
) -> StackConfig:
    """Validate the raw config objects (`cluster`, `tenants`, `hami`, `role`, ...) into a StackConfig.

    `kubeconfig_given` says whether the secret `kubeconfig` key is set (its value is not read
    here: it stays a secret Output). `base` is the project directory chart directories are
    relative to (default: the working directory, where `pulumi up` runs the program).
    """
    c = Collector(project)
    cluster = read_section(ClusterConfig, raw.get("cluster"), ("cluster",), project, c.problems)
    if cluster is not None:
        net = ipaddress.IPv4Network(cluster.subnet)
        addr = ipaddress.IPv4Address(cluster.management_ip)
        if addr not in net or addr in (net.network_address, net.broadcast_address):
            c.fail("cluster.managementIp", f"must be a host address inside {cluster.subnet}, got {addr}")
        elif addr == net.network_address + 1:
            c.fail("cluster.managementIp", f"{addr} is the Docker network gateway; use another host address")
        if cluster.mode == MODE_KUBECONFIG and not kubeconfig_given:
            c.fail(
                "kubeconfig",
                "is required when cluster.mode is 'kubeconfig': "
                'pulumi config set --secret kubeconfig -- "$(cat kubeconfig.yaml)"',
            )
    hami = read_section(HamiConfig, raw.get("hami"), ("hami",), project, c.problems)
    if hami is not None and hami.kube_burst < hami.kube_qps:
        c.fail("hami.kubeBurst", f"must be at least hami.kubeQps ({hami.kube_qps}), got {hami.kube_burst}")
    role = raw.get("role")
    role = ROLE_LAB if role is None else role
    if role not in ROLES:
        c.fail("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    if raw.get("platformStack") is not None:
        c.fail(
            "platformStack",
            "is gone: a team stack no longer reads the platform's state; remove the key, and have the platform "
            "owner run scripts/grant-team.sh <team> (it sets managementToken, managementServer and managementCa)",
        )
    server, ca = _grant(raw, role, management_token_given, c)
    tenants: list[TenantConfig] = []
    raw_tenants = raw.get("tenants")
    if role == ROLE_PLATFORM:
        if raw_tenants:
            c.fail("tenants", "a platform stack has no tenants: each team stack creates its own")
    elif role in ROLES:
        tenants = _tenants(project, raw_tenants, cluster, c)
    if role == ROLE_TEAM and len(tenants) > 1:
        c.fail(
            "tenants",
            f"a team stack holds its team's one tenant (its grant reaches {tenant_namespace(tenants[0].name)} only); "
            f"give each of {', '.join(t.name for t in tenants)} a stack of its own",
        )
    if cluster is not None and tenants:
        _subnet_room(cluster, tenants, c)
    teams = _teams(project, raw.get("teams"), role, c)
    mirror, images, charts = _closed_network(project, raw, base or Path.cwd(), c)
    if c.problems:
        raise ConfigError(c.problems, tuple(c.warnings))
    return StackConfig(
        project=project,
        cluster=cluster,
        tenants=tuple(tenants),
        hami=hami,
        role=role,
        management_server=server,
        management_ca=ca,
        teams=tuple(teams),
        mirror=mirror,
        images=images,
        charts=charts,
        warnings=tuple(c.warnings),
    )


def _grant(raw: Mapping[str, object], role: str, token_given: bool, c: Collector) -> tuple[str | None, str | None]:
    """A team stack's grant (MANAGEMENT_*_KEY): the token (given or not: it stays a secret), the
    management API server's https URL and its CA. Other roles hold none of it."""
    server, ca = raw.get(MANAGEMENT_SERVER_KEY), raw.get(MANAGEMENT_CA_KEY)
    how = "the platform owner sets it with scripts/grant-team.sh <team> (see docs/teams.md)"
    if role not in ROLES:  # said at `role`
        return None, None
    if role != ROLE_TEAM:
        for key, value in ((MANAGEMENT_SERVER_KEY, server), (MANAGEMENT_CA_KEY, ca)):
            if value not in (None, NOT_READ):
                c.fail(key, f"only a team stack holds a grant to the management cluster (role is {role!r})")
        return None, None
    if not token_given:
        c.fail(
            MANAGEMENT_TOKEN_KEY,
            f"a team stack reaches the management cluster with its team's own token, a secret: {how}",
        )
    if server is None:
        c.fail(MANAGEMENT_SERVER_KEY, f"a team stack needs the management API server's URL: {how}")
    elif server != NOT_READ and (problem := https_url_problem(server)):
        c.fail(MANAGEMENT_SERVER_KEY, problem)
    if ca is None:
        c.fail(MANAGEMENT_CA_KEY, f"a team stack needs the management API server's CA: {how}")
    elif ca != NOT_READ and (problem := base64_pem_problem(ca)):
        c.fail(MANAGEMENT_CA_KEY, problem)
    return (
        str(server) if server not in (None, NOT_READ) else None,
        str(ca) if ca not in (None, NOT_READ) else None,
    )


def _teams(project: str, raw: object, role: str, c: Collector) -> list[TeamSlot]:
    """The platform's registry of team names and ports: team stacks must match it."""
    if raw is None:
        return []
    if role != ROLE_PLATFORM:
        c.fail("teams", "only a platform stack keeps the team registry")
        return []
    if not isinstance(raw, list | tuple):
        c.fail("teams", "must be a list of {name, apiPort, konnectivityPort}")
        return []
    slots = [(i, read_section(TeamSlot, t, ("teams", i), project, c.problems)) for i, t in enumerate(raw)]
    valid = [(i, s) for i, s in slots if s is not None]
    unique(c, [(f"teams[{i}]", s.name, s.api_port, s.konnectivity_port) for i, s in valid], "team")
    schemas: dict[str, str] = {}
    for i, s in valid:  # stack names may hold `_`: two teams' keys could be named alike
        schema = s.datastore_schema(project)
        if schema in schemas:
            c.fail(
                f"teams[{i}].stack", f"its etcd keys {schema!r} would be {schemas[schema]}'s too: name another stack"
            )
        schemas.setdefault(schema, s.name)
    return [s for _, s in valid]


# What a stack's config holds, read by its key: objects and plain values (of the secrets,
# `kubeconfig` and MANAGEMENT_TOKEN_KEY, only whether they are given).
OBJECT_KEYS = ("cluster", "tenants", "hami", "teams", "mirror", "images", "charts")
TEXT_KEYS = ("role", "platformStack", MANAGEMENT_SERVER_KEY, MANAGEMENT_CA_KEY)


def load_config(project: str, value: Callable[[str], object], base: Path | None = None) -> StackConfig:
    """The stack config from one lookup by key (without the `<project>:` prefix): Pulumi's own
    config at `up`, a stack file's `config:` for the offline tools."""
    return load_stack_config(
        project,
        {key: value(key) for key in (*OBJECT_KEYS, *TEXT_KEYS)},
        kubeconfig_given=value("kubeconfig") is not None,
        management_token_given=value(MANAGEMENT_TOKEN_KEY) is not None,
        base=base,
    )


def read_stack_file(path: Path, any_role: bool = False) -> tuple[str, dict[str, object]]:
    """(project, config by key without its prefix) of a Pulumi stack file; the project is the
    prefix of its one `<project>:tenants` key (`any_role`: or of all its keys, as a platform
    stack has no tenants)."""
    _, doc = read_document(path)
    config = doc.get("config") if isinstance(doc, Mapping) else None
    if not isinstance(config, Mapping):
        raise StackFileError(f"stack file {path} has no `config:` mapping (a Pulumi stack file has one)")
    keys = sorted(k for k in config if isinstance(k, str) and k.endswith(":tenants"))
    projects = {k.split(":", 1)[0] for k in config if isinstance(k, str) and ":" in k}
    if any_role and not keys and len(projects) == 1:
        keys = [f"{next(iter(projects))}:tenants"]
    if len(keys) != 1:
        found = f"found {', '.join(keys)}" if keys else "found none"
        raise StackFileError(f"stack file {path} needs exactly one `<project>:tenants` key under config; {found}")
    project = keys[0].rsplit(":", 1)[0]
    prefix = f"{project}:"
    return project, {k[len(prefix) :]: v for k, v in config.items() if isinstance(k, str) and k.startswith(prefix)}


def load_stack_file(path: Path, secrets_set: bool = False) -> StackConfig:
    """A stack file's whole config, validated exactly as `up` validates it (`secrets_set`: as if
    its secret keys were set, for tools that never read them; any role's stack file then)."""
    project, config = read_stack_file(path, any_role=secrets_set)

    def value(key: str) -> object:
        if secrets_set and key in ("kubeconfig", *GRANT_KEYS):
            return config.get(key, NOT_READ)
        return config.get(key)

    return load_config(project, value, base=path.resolve().parent)
