"""Plan comparison: the stack's GPU workloads on two or more fleet plans, per tenant: what fits,
what stays Pending with HAMi's reason, and the cards, MB and cores % the placed pods hold.

Each tenant gets its own fleet of the plan (tenants never share worker nodes). Placement is the
rulebook's own (`components.domain.rules.place_all`, the `pack` the policy pack and the config
validation use), so a plan said to fit here passes `up` and the policy pack on that fleet. No
Pulumi import: run it as
    .venv/bin/python -m components.reports.plan_comparison --stack Pulumi.dev.yaml \\
        --plan "a100=8xA100-80GB" --plan "l4=24xL4/4" --plan "mix=2xA100-80GB/8+6xL4/8" [--markdown]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from components.config.load import load_tenants, read_stack_file
from components.config.model import ROLE_PLATFORM, TenantConfig
from components.config.problems import ConfigError
from components.config.stack_file import ROOT, StackFileError, resolve
from components.domain.catalog import GPU_MODELS
from components.domain.requests import Demand, Quota, RequestError
from components.domain.rules import Fleet, NodeGroup, PendingPod, Placement, judge, place_all
from components.kube.hami_reasons import WORDS
from components.reports.tables import markdown_table, text_table

PROG = "python -m components.reports.plan_comparison"
# Bounds that keep a typo (24000 nodes) from a long run; far above any fleet a team plans.
MAX_PLAN_NODES = 10_000
MAX_PLAN_CARDS_PER_NODE = 64
_PART = re.compile(r"^(?P<nodes>\d+)x(?P<model>[^/\s+]+)(?:/(?P<cards>\d+))?$")
SYNTAX = "[name=]<nodes>x<model>[/<cards per node>][+<nodes>x<model>[/<cards per node>]...]"


class PlanError(ValueError):
    """Bad input (plan, stack file, config): one message for stderr, exit code 2."""


@dataclass(frozen=True)
class Plan:
    """One fleet plan, as given on the command line."""

    name: str
    fleet: Fleet

    def describe(self) -> str:
        return f"{self.name} = {self.fleet.describe()}"


def _part(text: str, part: str) -> NodeGroup:
    """One `<nodes>x<model>[/<cards per node>]` of a plan."""
    m = _PART.match(part.strip())
    if not m:
        raise PlanError(f"plan {text!r} is not {SYNTAX} (e.g. 8xA100-80GB, l4=24xL4/4 or 2xA100-80GB/8+6xL4/8)")
    model = GPU_MODELS.get(m["model"]) or {k.lower(): v for k, v in GPU_MODELS.items()}.get(m["model"].lower())
    if model is None:
        raise PlanError(f"plan {text!r}: unknown card model {m['model']!r}; known: {', '.join(sorted(GPU_MODELS))}")
    nodes, cards = int(m["nodes"]), int(m["cards"] or 1)
    if not 1 <= nodes <= MAX_PLAN_NODES:
        raise PlanError(f"plan {text!r}: {nodes} nodes; give 1-{MAX_PLAN_NODES}")
    if not 1 <= cards <= MAX_PLAN_CARDS_PER_NODE:
        raise PlanError(f"plan {text!r}: {cards} cards per node; give 1-{MAX_PLAN_CARDS_PER_NODE}")
    return NodeGroup(model, nodes, cards)


def parse_plan(text: str) -> Plan:
    """`[name=]<part>[+<part>...]`, each part `<nodes>x<model>[/<cards per node>]`, e.g. `l4=24xL4/4`
    or a mixed fleet `200xA100-80GB/8+600xL4/8`; the name defaults to the spec."""
    name, _, spec = text.strip().rpartition("=")
    if "=" in name or any(c.isspace() for c in name):
        raise PlanError(f"plan {text!r} is not {SYNTAX}")
    groups = tuple(_part(text, p) for p in spec.split("+"))
    total = sum(g.nodes for g in groups)
    if total > MAX_PLAN_NODES:
        raise PlanError(f"plan {text!r}: {total} nodes in all; give at most {MAX_PLAN_NODES}")
    default = "+".join(
        f"{g.nodes}x{g.model.key}" + (f"/{g.cards_per_node}" if "/" in p else "")
        for g, p in zip(groups, spec.split("+"), strict=True)
    )
    return Plan(name=name or default, fleet=Fleet(groups))


def parse_plans(texts: Sequence[str]) -> list[Plan]:
    """At least two plans, each name once: a comparison of one plan compares nothing."""
    if len(texts) < 2:
        got = f"got {len(texts)}" + (f" ({texts[0]!r})" if texts else "")
        raise PlanError(f"give at least two --plan {SYNTAX} to compare; {got}")
    plans = [parse_plan(t) for t in texts]
    seen: set[str] = set()
    for p in plans:
        if p.name in seen:
            raise PlanError(f"plan name {p.name!r} is given twice; name them apart with name=<spec>")
        seen.add(p.name)
    return plans


def read_stack(stack: str, root: Path = ROOT) -> list[TenantConfig]:
    """Tenants of a stack (its name or its file), validated as `up` and the policy pack validate
    them; none for a stack without tenants (a platform's)."""
    path = Path(stack)
    try:
        path = resolve(stack, root).path
        project, config = read_stack_file(path, any_role=True)
        if not config.get("tenants") and config.get("role") == ROLE_PLATFORM:
            return []
        return load_tenants(project, config.get("tenants"), config.get("cluster"))
    except StackFileError as exc:
        raise PlanError(str(exc)) from None
    except ConfigError as exc:
        raise PlanError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class TenantPlan:
    """One tenant's workloads on one plan."""

    tenant: str
    plan: Plan
    placement: Placement
    # "Kind name: why" for workloads the plan's cards cannot express (they are left out).
    unexpressible: tuple[str, ...] = ()
    over_quota: tuple[str, ...] = ()

    @property
    def pending(self) -> tuple[PendingPod, ...]:
        return self.placement.pending

    @property
    def pods(self) -> int:
        return self.placement.pods


def compare_tenant(tenant: Any, plan: Plan, progress: bool = False) -> TenantPlan:
    """Place a tenant's workloads (`name`, `workloads`, `quota.quota` of a TenantConfig) on one
    plan: each read on the plan's card models it allows; a workload no model of the plan allows
    stays Pending with CardTypeMismatch (the rulebook's own verdict)."""
    models = plan.fleet.models
    demands: list[Demand] = []
    unexpressible: list[str] = []
    for w in tenant.workloads:
        try:
            d = w.demand(models)
        except RequestError as exc:
            on = "/".join(m.key for m in models)
            unexpressible.append(f"{w.kind} {w.name}: cannot be expressed on {on}: {exc}")
            continue
        if not d.pod.containers:
            continue  # asks for no GPU on these models: nothing to place
        demands.append(d)
    verdict = judge(demands, tenant.quota.quota, plan.fleet)
    # A bar on the terminal (stderr) for a run that takes a while; nothing in a pipe or a log.
    with tqdm(
        total=sum(d.peak for d in demands),
        desc=f"{tenant.name} on {plan.name}",
        unit="pod",
        file=sys.stderr,
        leave=False,
        delay=1.0,
        disable=None if progress else True,
    ) as bar:
        placement = place_all(demands, plan.fleet, progress=bar.update)
    return TenantPlan(
        tenant=tenant.name,
        plan=plan,
        placement=placement,
        unexpressible=tuple(unexpressible),
        over_quota=tuple(verdict.over_quota),
    )


def compare(tenants: Iterable[Any], plans: Sequence[Plan], progress: bool = False) -> list[TenantPlan]:
    """Every tenant on every plan, tenant by tenant (`progress`: a bar on a terminal)."""
    return [compare_tenant(t, p, progress) for t in tenants for p in plans]


# -- rendering -------------------------------------------------------------------------------
COLUMNS = (
    "tenant",
    "plan",
    "pods placed",
    "cards used",
    "gpumem MB used",
    "gpucores % used",
    "quota",
    "Pending (HAMi's reason)",
)


def _reasons(p: PendingPod, nodes: int) -> str:
    if not p.reasons:
        return "no card refuses it (a node the rulebook stopped scanning as full)"
    return ", ".join(f"{code} ({n}/{nodes} nodes)" for code, n in p.reasons)


# Pending groups a table cell shows; the rest are counted (the cell of a fleet-size plan stays a line).
PENDING_GROUPS_SHOWN = 3


def pending_groups(r: TenantPlan) -> list[tuple[str, int]]:
    """Pending pods grouped per workload and reason, with their count:
    ('Deployment x: 2 pods: Code (n/N nodes)', 2)."""
    groups: dict[tuple[str, str, bool], int] = {}
    for p in r.pending:
        key = (p.demand, _reasons(p, r.plan.fleet.nodes), p.allowed)
        groups[key] = groups.get(key, 0) + 1
    out = []
    for (demand, reasons, allowed), n in groups.items():
        note = " [failOnPending: false, may stay Pending]" if allowed else ""
        out.append((f"{demand}: {n} pod{'s' if n != 1 else ''}: {reasons}{note}", n))
    return out


def pending_cell(r: TenantPlan) -> str:
    """The first PENDING_GROUPS_SHOWN groups, then how many more groups and pods."""
    groups = pending_groups(r)
    shown = [text for text, _ in groups[:PENDING_GROUPS_SHOWN]]
    rest = groups[PENDING_GROUPS_SHOWN:]
    if rest:
        pods = sum(n for _, n in rest)
        shown.append(f"and {len(rest)} more workload(s), {pods:,} pod{'s' if pods != 1 else ''}")
    return "; ".join(shown) or "none"


def _used(used: int, total: int) -> str:
    return f"{used:,} / {total:,}"


def rows(report: Sequence[TenantPlan]) -> list[tuple[str, ...]]:
    """Table cells per tenant and plan, then one row per workload the plan cannot express."""
    out: list[tuple[str, ...]] = []
    for r in report:
        pl = r.placement
        cap: Quota = pl.capacity
        quota = "over: " + "; ".join(r.over_quota) if r.over_quota else "ok"
        out.append(
            (
                r.tenant,
                r.plan.name,
                f"{len(pl.placed)} / {r.pods}",
                _used(pl.cards_used, pl.cards),
                _used(pl.allocated.gpumem_mb, cap.gpumem_mb),
                _used(pl.allocated.gpucores, cap.gpucores),
                quota,
                pending_cell(r),
            )
        )
        out += [(r.tenant, r.plan.name, "-", "-", "-", "-", "-", note) for note in r.unexpressible]
    return out


def codes_used(report: Sequence[TenantPlan]) -> list[str]:
    return sorted({c for r in report for p in r.pending for c in p.codes})


def render_table(report: Sequence[TenantPlan], plans: Sequence[Plan]) -> str:
    lines = ["plans (each tenant on its own fleet of the plan):", *(f"  {p.describe()}" for p in plans), ""]
    lines.append(text_table(COLUMNS, rows(report)))
    if codes := codes_used(report):
        lines += ["", "HAMi's reasons:", *(f"  {c}: {WORDS.get(c, c)}" for c in codes)]
    return "\n".join(lines)


def render_markdown(report: Sequence[TenantPlan], plans: Sequence[Plan], stack: str) -> str:
    lines = [f"### GPU plan comparison: `{stack}`", "", *(f"- `{p.name}`: {p.fleet.describe()}" for p in plans), ""]
    lines.append(markdown_table(COLUMNS, rows(report)))
    if codes := codes_used(report):
        lines += ["", *(f"- `{c}`: {WORDS.get(c, c)}" for c in codes)]
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--stack", default="dev", help="a stack's name (its Pulumi.<name>.yaml; default dev) or a stack file"
    )
    parser.add_argument("--plan", action="append", default=[], metavar=SYNTAX, help="a fleet plan; give two or more")
    parser.add_argument("--markdown", action="store_true", help="Markdown for a PR comment instead of a table")
    args = parser.parse_args(argv)
    try:
        plans = parse_plans(args.plan)
        tenants = read_stack(args.stack)
    except PlanError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if not tenants:
        print(f"stack {args.stack}: no tenants here, no workloads to place (each team stack has its own)")
        return 0
    report = compare(tenants, plans, progress=True)
    print(render_markdown(report, plans, str(args.stack)) if args.markdown else render_table(report, plans))
    return 0


if __name__ == "__main__":
    sys.exit(main())
