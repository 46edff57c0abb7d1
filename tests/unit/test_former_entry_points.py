"""The commands' former `python -m components.ops.X` forms still run what moved."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIMS = sorted(p for p in (ROOT / "components/ops").rglob("*.py") if p.name != "__init__.py")


def target(path: Path) -> str:
    (call,) = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
    return call.args[0].value


@pytest.mark.parametrize("shim", SHIMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_former_path_names_a_module_that_runs(shim):
    spec = importlib.util.find_spec(target(shim))
    assert spec is not None, target(shim)
    runs = spec.submodule_search_locations is not None or "__main__" in Path(spec.origin).read_text()
    assert runs, f"{target(shim)} has no __main__"


@pytest.mark.parametrize(
    "name", ["capacity_report", "plan_comparison", "image_list", "team_token", "bound_token", "release"]
)
def test_the_former_form_answers_help(name):
    proc = subprocess.run(
        [sys.executable, "-m", f"components.ops.{name}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: "), proc.stderr[-2000:]
