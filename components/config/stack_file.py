"""Which stack file a tool means, and whose project it is: one spelling of `--stack` for every
offline tool (a stack's name, read as `Pulumi.<name>.yaml` beside `Pulumi.yaml`, or any path to a
stack file), and the project's name as Pulumi reads it, from `Pulumi.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILE = "Pulumi.yaml"


class StackFileError(ValueError):
    """A stack file that cannot be read as one (missing, not YAML, no `config:`, no project)."""


@dataclass(frozen=True)
class StackFile:
    path: Path
    # The stack's name (`pulumi stack select <name>`): Pulumi.<name>.yaml.
    name: str
    # The project's directory (its Pulumi.yaml) and name.
    root: Path
    project: str


def read_document(path: Path) -> tuple[str, object]:
    """(text, parsed YAML) of a stack file; StackFileError, in one line, when it cannot be read
    or is not YAML (the line, where the parser says it)."""
    try:
        text = path.read_text()
        return text, yaml.safe_load(text)
    except OSError as exc:
        raise StackFileError(f"cannot read stack file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise StackFileError(f"stack file {path} is not valid YAML{at}: {problem}") from None


def project_root(start: Path) -> Path | None:
    """The nearest directory from `start` up that holds a Pulumi.yaml (examples/ -> the project)."""
    for folder in (start, *start.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def project_name(root: Path) -> str:
    """The project's name, from its Pulumi.yaml: the prefix of its config keys."""
    try:
        doc = yaml.safe_load((root / PROJECT_FILE).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise StackFileError(f"cannot read {root / PROJECT_FILE}: {exc}") from None
    name = doc.get("name") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name:
        raise StackFileError(f"{root / PROJECT_FILE} has no `name:` (the project's name)")
    return name


def resolve(stack: str, root: Path = ROOT) -> StackFile:
    """`--stack` as a stack's name (its Pulumi.<name>.yaml in `root`) or a stack file's path."""
    if stack.endswith((".yaml", ".yml")) or "/" in stack:
        path = Path(stack)
        if not path.is_file():
            raise StackFileError(f"no stack file {path}")
        name = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        found = project_root(path.resolve().parent) or root
    else:
        path, name, found = root / f"Pulumi.{stack}.yaml", stack, root
        if not path.is_file():
            shipped = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))
            raise StackFileError(
                f"no stack {stack!r}: {path.name} is not in {root} (stacks here: {', '.join(shipped) or 'none'}; "
                "or give a stack file's path)"
            )
    return StackFile(path=path, name=name, root=found, project=project_name(found))
