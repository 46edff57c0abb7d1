"""What a program imports, read from the source (no import runs): the project files and third-party
packages a module needs, transitively. The controllers' image copies exactly that
(tests/unit/test_layers.py holds its Dockerfile to it; the Docker tier checks the built image)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the image runs: the release controller, and the token keeper beside KWOK.
IMAGE_ENTRY_POINTS = ("components.controllers.release.__main__", "components.kube.bound_token")


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def module_file(name: str) -> Path | None:
    path = ROOT / Path(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def closure(start: str) -> tuple[set[Path], set[str]]:
    """Project files and third-party top-level packages a module needs, transitively."""
    files: set[Path] = set()
    third: set[str] = set()
    todo = [start]
    while todo:
        path = module_file(todo.pop())
        if path is None or path in files:
            continue
        files.add(path)
        for parent in path.relative_to(ROOT).parents:
            init = ROOT / parent / "__init__.py"
            if init.is_file():
                files.add(init)
        for name in imports(path):
            top = name.split(".")[0]
            if top == "components":
                todo.append(name)
            elif top not in ("__future__",) and module_file(top) is None and not _stdlib(top):
                third.add(top)
    return files, third


def _stdlib(name: str) -> bool:
    return name in sys.stdlib_module_names


def image_files() -> tuple[set[str], set[str]]:
    """The project files the image's programs import (with their packages' __init__), and the
    third-party packages they import."""
    files: set[str] = set()
    third: set[str] = set()
    for entry in IMAGE_ENTRY_POINTS:
        found, imported = closure(entry)
        files |= {str(p.relative_to(ROOT)) for p in found}
        third |= imported
    return files, third
