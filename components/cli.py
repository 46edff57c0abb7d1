"""`gpu-tenancy`: the project's tools behind one command (pyproject.toml's console script). Each
subcommand is its module's own command line, so `python -m <module>` runs the same; a module is
imported only when its command runs (the reports' plotting library is never loaded by the others)."""

from __future__ import annotations

import importlib
import sys

PROG = "gpu-tenancy"
# Subcommand -> (module with main(argv, prog), what it does).
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("components.config.check", "check a stack file as `pulumi up` would, offline: every problem at once"),
    "capacity": ("components.reports.capacity_report", "GPU quota, requests and headroom per tenant (--picture)"),
    "plans": ("components.reports.plan_comparison", "compare fleet plans against a stack's workloads"),
    "images": ("components.reports.image_list", "the images a stack pulls, and by whom"),
    "release-controller": ("components.controllers.release.daemon", "release GPU pods on mock-GPU nodes"),
    "scrape": ("components.controllers.release.scrape", "read a running release controller's metrics"),
    "token-keeper": ("components.kube.bound_token", "keep a ServiceAccount's bound token valid in a file"),
    "team-token": ("components.kube.team_token", "a team's bound token, for its stack's config"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} COMMAND [ARGS...]   ({PROG} COMMAND --help for its own)", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"{PROG}: unknown command {name!r}; one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return module.main(rest, prog=f"{PROG} {name}")


if __name__ == "__main__":
    sys.exit(main())
