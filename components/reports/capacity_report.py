"""Capacity report: per tenant, the fake GPU fleet, its quota, what the stack's workloads request,
the headroom left under the quota and what stays free on the fleet, and (when the tenant is
reachable) what HAMi has actually allocated.

The allocation comes from HAMi's own accounting on the pods (hami.io/vgpu-devices-allocated),
not from our arithmetic; pods HAMi leaves Pending are listed with HAMi's own reason per node.
No Pulumi import: run it as
    .venv/bin/python -m components.reports.capacity_report --stack dev [--markdown] [--live]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.config.load import load_stack_file
from components.config.model import StackConfig, TenantConfig
from components.config.problems import ConfigError
from components.config.stack_file import StackFile, StackFileError, resolve
from components.domain import hami_annotations as ha
from components.domain.requests import Quota, total_usage
from components.kube import hami_reasons
from components.kube.client import core_api, get_json, http_status
from components.reports import fleet_picture
from components.reports.tables import markdown_table, text_table

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class TenantCapacity:
    tenant: str
    # The cards, per model: "1 x NVIDIA A100 80GB", "160 x NVIDIA A100 80GB + 480 x NVIDIA L4 24GB".
    cards: str
    fleet: Quota
    quota: Quota
    requested: Quota
    allocated: Quota | None  # None: the tenant was not asked (or not reachable)
    note: str = ""
    # Pods HAMi schedules that wait unscheduled: "namespace/pod: HAMi's reason".
    waiting: tuple[str, ...] = ()

    @property
    def headroom(self) -> Quota:
        """What the quota still allows beyond the requests (negative: over quota)."""
        return _minus(self.quota, self.requested)

    @property
    def free(self) -> Quota:
        """What the fleet still holds beyond the requests (negative: more asked than it has)."""
        return _minus(self.fleet, self.requested)


def _minus(a: Quota, b: Quota) -> Quota:
    return Quota(gpus=a.gpus - b.gpus, gpumem_mb=a.gpumem_mb - b.gpumem_mb, gpucores=a.gpucores - b.gpucores)


def allocated_by_hami(core: CoreV1Api) -> Quota:
    """Sum of what HAMi recorded on the tenant's live pods (finished pods hold nothing)."""
    slices = [
        d for pod in get_json(core.list_pod_for_all_namespaces).get("items") or [] for d in ha.pod_allocation(pod)
    ]
    return Quota(gpus=len(slices), gpumem_mb=sum(d.usedmem for d in slices), gpucores=sum(d.usedcores for d in slices))


def waiting_for_hami(core: CoreV1Api) -> tuple[str, ...]:
    """Each unscheduled pod HAMi schedules, with HAMi's reason per node."""
    out = []
    for pod in get_json(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=").get("items") or []:
        phase = (pod.get("status") or {}).get("phase")
        if pod["spec"].get("schedulerName") != ha.SCHEDULER_NAME or phase not in (None, "Pending"):
            continue
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        reason = hami_reasons.pending_reason(core, namespace, name)
        out.append(f"{namespace}/{name}: {reason.text}")
    return tuple(sorted(out))


def failure(exc: BaseException) -> str:
    """What failed, in one line: the API's status, or the connection's own words without the
    client library's object names (urllib3's "<...HTTPSConnection object at 0x...>: ")."""
    status = http_status(exc)
    if status is not None:
        return f"the API server answered {status} {getattr(exc, 'reason', '') or ''}".rstrip()
    text = str(getattr(exc, "reason", None) or exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.split(">: ", 1)[-1].strip()


def tenant_capacity(t: TenantConfig, core: CoreV1Api | None = None, unreachable: str = "") -> TenantCapacity:
    """`unreachable`: why no client could be made for the tenant (a broken kubeconfig)."""
    fleet = t.fleet
    allocated, note, waiting = None, f"not reachable: {unreachable}" if unreachable else "", ()
    if core is not None:
        try:
            allocated = allocated_by_hami(core)
            waiting = waiting_for_hami(core)
        except Exception as exc:  # noqa: BLE001 - an unreachable tenant is reported, not fatal
            note = f"not reachable: {failure(exc)}"
    return TenantCapacity(
        tenant=t.name,
        cards=" + ".join(
            f"{sum(g.cards for g in fleet.groups if g.model == m)} x {m.display_name}" for m in fleet.models
        ),
        fleet=fleet.capacity,
        quota=t.quota.quota,
        requested=total_usage(t.demands()),
        allocated=allocated,
        note=note,
        waiting=waiting,
    )


COLUMNS = (
    "tenant",
    "fleet",
    "quota",
    "requested",
    "quota headroom",
    "fleet free",
    "allocated (HAMi)",
    "waiting (HAMi's reason)",
)


def _fmt(q: Quota | None) -> str:
    if q is None:
        return "-"
    return f"{q.gpus} vGPU / {q.gpumem_mb:,} MB / {q.gpucores} %"


def rows(report: list[TenantCapacity]) -> list[tuple[str, ...]]:
    out = []
    for r in report:
        allocated = r.note or _fmt(r.allocated)
        out.append(
            (
                f"{r.tenant} ({r.cards})",
                _fmt(r.fleet),
                _fmt(r.quota),
                _fmt(r.requested),
                _fmt(r.headroom),
                _fmt(r.free),
                allocated,
                ("; ".join(r.waiting) or "none") if r.allocated is not None else "-",
            )
        )
    return out


def render_table(report: list[TenantCapacity]) -> str:
    return text_table(COLUMNS, rows(report))


def render_markdown(report: list[TenantCapacity], stack: str) -> str:
    return f"### GPU capacity: stack `{stack}`\n\n" + markdown_table(COLUMNS, rows(report))


def load_stack(stack: str, root: Path = ROOT) -> StackConfig:
    """The stack's config, validated as `up` does; its secrets are never read here, so a stack
    file without them (a team's, before its token is set) is reported all the same."""
    return load_stack_file(resolve(stack, root).path, secrets_set=True)


def pulumi_cli(env: Mapping[str, str] = os.environ) -> tuple[str, dict[str, str]]:
    """The pulumi CLI and its environment: on PATH, or where tools/build.sh put it (its cache,
    GPU_TENANCY_CACHE or ~/.cache/gpu-tenancy). FileNotFoundError, in one line, when neither."""
    out = dict(env)
    found = shutil.which("pulumi", path=env.get("PATH"))
    if found:
        return found, out
    cache = Path(env.get("GPU_TENANCY_CACHE") or Path.home() / ".cache" / "gpu-tenancy")
    built = cache / "bin" / "pulumi"
    if built.is_file():
        out.setdefault("PULUMI_HOME", str(cache / "pulumi-home"))
        out.setdefault("PULUMI_SKIP_UPDATE_CHECK", "true")
        return str(built), out
    raise FileNotFoundError(
        f"--live reads the stack's outputs with the pulumi CLI: not on PATH nor in {cache / 'bin'} "
        "(bash tools/build.sh builds it)"
    )


def stack_kubeconfigs(stack: StackFile) -> Mapping[str, str]:
    """Tenant kubeconfigs from the stack's outputs (`pulumi stack output --show-secrets`)."""
    cli, env = pulumi_cli()
    env.setdefault("PULUMI_BACKEND_URL", f"file://{stack.root / '.pulumi-state'}")
    result = subprocess.run(
        [cli, "stack", "output", "--json", "--show-secrets", "--stack", stack.name],
        cwd=stack.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot read the outputs of stack {stack.name}: {result.stderr.strip()}")
    outputs = json.loads(result.stdout or "{}")
    return {k: v["kubeconfig"] for k, v in outputs.items() if isinstance(v, dict) and "kubeconfig" in v}


def build_report(
    cfg: StackConfig, kubeconfigs: Mapping[str, str] | None = None, client: Callable[[str], Any] = core_api
) -> list[TenantCapacity]:
    out = []
    for t in cfg.tenants:
        kc = (kubeconfigs or {}).get(t.name)
        try:
            core = client(kc) if kc else None
        except Exception as exc:  # noqa: BLE001 - a kubeconfig that cannot be read is reported too
            out.append(tenant_capacity(t, None, failure(exc)))
            continue
        out.append(tenant_capacity(t, core))
    return out


def pictures(
    cfg: StackConfig, kubeconfigs: Mapping[str, str] | None = None, client: Callable[[str], Any] = core_api
) -> tuple[list[fleet_picture.FleetPicture], list[str]]:
    """Each tenant's picture (live where its kubeconfig is given), and one line per tenant whose
    live picture could not be read, naming it and what failed (the others are still drawn)."""
    out, failed = [], []
    for t in cfg.tenants:
        kc = (kubeconfigs or {}).get(t.name)
        if not kc:
            out.append(fleet_picture.declared(t, cfg.cluster.name))
            continue
        try:
            out.append(fleet_picture.live(t.name, client(kc)))
        except Exception as exc:  # noqa: BLE001 - one tenant's failure is reported, the rest drawn
            failed.append(f"tenant {t.name}: no live picture, its API server could not be read: {failure(exc)}")
    return out, failed


def main(argv: list[str] | None = None, prog: str = "python -m components.reports.capacity_report") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--stack", default="dev", help="a stack name (its Pulumi.<stack>.yaml is read; default dev) or a stack file"
    )
    parser.add_argument("--markdown", action="store_true", help="Markdown for a PR comment instead of a table")
    parser.add_argument("--live", action="store_true", help="also ask each tenant what HAMi has allocated")
    parser.add_argument(
        "--picture",
        type=Path,
        metavar="DIR",
        help="also draw each tenant's cards and who holds which slice into DIR/<tenant>.svg and .png "
        "(the declared workloads; with --live, HAMi's allocation)",
    )
    args = parser.parse_args(argv)
    try:
        stack = resolve(args.stack, ROOT)
        cfg = load_stack_file(stack.path, secrets_set=True)
    except (StackFileError, ConfigError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if not cfg.tenants:
        print(f"stack {stack.name}: no tenants here (a {cfg.role} stack; each team stack reports its own)")
        return 0
    try:
        kubeconfigs = stack_kubeconfigs(stack) if args.live else None
    except (RuntimeError, OSError, ValueError) as exc:  # no pulumi, no such stack, outputs unreadable
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    report = build_report(cfg, kubeconfigs)
    print(render_markdown(report, args.stack) if args.markdown else render_table(report))
    if not args.picture:
        return 0
    drawn, failed = pictures(cfg, kubeconfigs)
    try:
        for path in fleet_picture.render_all(drawn, args.picture):
            print(f"wrote {path}", file=sys.stderr)
    except OSError as exc:
        failed.append(f"cannot write the pictures into {args.picture}: {exc.strerror or exc}")
    for line in failed:
        print(f"{parser.prog}: error: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
