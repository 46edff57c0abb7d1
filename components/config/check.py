"""Check a stack file offline, as `pulumi up` would validate it, before anything exists.

    gpu-tenancy check [--stack NAME|FILE]      # or: python -m components.config.check

Every problem in one run, in the words `up`, preview and the policy pack use (the same reader,
components.config.load); the warnings too, and what only a look at the file shows: keys of
another project or none of this project's (Pulumi ignores them), YAML aliases that give two
tenants one set of values, and secrets or a team's grant the file does not hold (`up` asks for
them; a check does not need them). Exit 0: no problem (warnings may be printed); 1: problems; 2: no stack file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from components.config.load import OBJECT_KEYS, TEXT_KEYS, load_config
from components.config.model import GRANT_KEYS, MANAGEMENT_TOKEN_KEY, MODE_KUBECONFIG, NOT_READ, ROLE_TEAM, StackConfig
from components.config.problems import ConfigError
from components.config.stack_file import ROOT, StackFile, StackFileError, read_document, resolve

PROG = "python -m components.config.check"
SECRET_KEYS = ("kubeconfig", MANAGEMENT_TOKEN_KEY)
KNOWN_KEYS = (*OBJECT_KEYS, *TEXT_KEYS, *SECRET_KEYS)
# How each secret (or a team's grant) is set, when a stack needs it and its file does not hold it.
GRANTED = "the platform owner sets it with scripts/grant-team.sh <team> (docs/teams.md)"
SET_SECRET = {"kubeconfig": 'pulumi config set --secret kubeconfig -- "$(cat kubeconfig.yaml)"'} | {
    key: GRANTED for key in GRANT_KEYS
}


@dataclass
class Findings:
    problems: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    config: StackConfig | None = None


def _paths(node: yaml.Node, at: str) -> Iterator[tuple[str, yaml.Node]]:
    """(path, node) of every node under `node`, depth first (`a.b[0].c`)."""
    yield at, node
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _paths(value, f"{at}.{key.value}" if at else str(key.value))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _paths(item, f"{at}[{i}]")


def shared_values(text: str, project: str) -> list[str]:
    """Values a YAML alias (`*name`) gives a second place in the project's config: a tenant's
    quota copied to another, say, so that a change to one is a change to both."""
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return []
    config = next((v for k, v in root.value if k.value == "config"), None)
    if config is None:
        return []
    first: dict[int, str] = {}
    out = []
    for path, node in _paths(config, ""):
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode) or not path.startswith(f"{project}:"):
            continue
        if id(node) in first:
            out.append(
                f"{path}: the same values as {first[id(node)]} (a YAML alias): a change to one changes both; "
                "write each out if they are meant to differ"
            )
        else:
            first[id(node)] = path
    return out


def key_warnings(config: dict[object, object], project: str) -> list[str]:
    """Keys Pulumi would not give this project: another project's, or none of this project's."""
    out = []
    for key in config:
        name = str(key)
        owner, _, short = name.rpartition(":")
        if owner != project:
            out.append(
                f"{name}: not a key of project {project!r} (Pulumi.yaml): ignored"
                + (f"; did you mean {project}:{short}?" if short in KNOWN_KEYS else "")
            )
        elif short not in KNOWN_KEYS:
            out.append(f"{name}: unknown key, ignored; the keys: {', '.join(KNOWN_KEYS)}")
    return out


def check(stack: StackFile) -> Findings:
    """Every problem and warning of one stack file (StackFileError: not a stack file at all)."""
    text, doc = read_document(stack.path)
    config = doc.get("config") if isinstance(doc, dict) else None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise StackFileError(f"stack file {stack.path}: `config:` is not a mapping")
    prefix = f"{stack.project}:"
    values = {str(k)[len(prefix) :]: v for k, v in config.items() if str(k).startswith(prefix)}
    found = Findings(warnings=key_warnings(config, stack.project) + shared_values(text, stack.project))

    def value(key: str) -> object:
        if key in SECRET_KEYS:  # never read here: present, or a warning below
            return NOT_READ
        if key in GRANT_KEYS:  # checked when present; when absent, a warning below
            return values.get(key, NOT_READ)
        return values.get(key)

    try:
        found.config = load_config(stack.project, value, base=stack.path.resolve().parent)
        found.warnings += [f"{stack.project}:{w}" for w in found.config.warnings]
    except ConfigError as exc:
        found.problems = exc.problems
        found.warnings += [f"{stack.project}:{w}" for w in exc.warnings]
    cfg = found.config
    needed = []
    if cfg is not None and cfg.cluster is not None and cfg.cluster.mode == MODE_KUBECONFIG:
        needed.append("kubeconfig")
    if cfg is not None and cfg.role == ROLE_TEAM:
        needed += GRANT_KEYS
    for key in needed:
        if key not in values:
            what = "a secret" if key in SECRET_KEYS else "a key"
            found.warnings.append(f"{prefix}{key}: {what} this file does not hold; `up` needs it: {SET_SECRET[key]}")
    return found


def shown(path: Path) -> str:
    """The path as the user knows it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def summary(stack: StackFile, found: Findings) -> str:
    what = ""
    if found.config is not None:
        tenants = len(found.config.tenants)
        what = f" (role {found.config.role}, {tenants} tenant{'s' * (tenants != 1)})"
    verdict = "valid" if not found.problems else f"{len(found.problems)} problem(s)"
    notes = f", {len(found.warnings)} warning(s)" if found.warnings else ""
    return f"{shown(stack.path)}{what}: {verdict}{notes}"


def main(argv: list[str] | None = None, prog: str = PROG, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--stack", default="dev", help="a stack's name (its Pulumi.<name>.yaml; default dev) or a file")
    args = parser.parse_args(argv)
    try:
        stack = resolve(args.stack, root)
        found = check(stack)
    except StackFileError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    for key, msg in found.problems:
        print(f"error: {key}: {msg}")
    for warning in found.warnings:
        print(f"warning: {warning}")
    print(summary(stack, found))
    return 1 if found.problems else 0


if __name__ == "__main__":
    sys.exit(main())
