"""The folders are the architecture: each layer imports only the layers below it, the layers
without Pulumi never import it, and the release controller's image holds all the code it runs."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Bottom to top; a module may import its own layer and those before it.
LAYERS = ("gpu", "config", "ops", "providers", "platform", "tenant")
NO_PULUMI = ("gpu", "config", "ops")
# Import name -> requirement name, for what the release controller's image installs.
DISTRIBUTIONS = {"kubernetes": "kubernetes", "yaml": "PyYAML", "prometheus_client": "prometheus-client"}


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


def modules(layer: str) -> list[Path]:
    return sorted((ROOT / "components" / layer).glob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_layers_below(layer):
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    for path in modules(layer):
        for name in imports(path):
            parts = name.split(".")
            if parts[0] == "components" and len(parts) > 1:
                assert parts[1] in allowed, f"{path.relative_to(ROOT)} imports {name} (layer {parts[1]} is above)"
            if layer in NO_PULUMI:
                assert parts[0] not in ("pulumi", "pulumi_kubernetes", "pulumi_docker", "pulumi_command"), (
                    f"{path.relative_to(ROOT)} imports {name}"
                )


def test_policy_pack_imports_domain_and_config_only():
    for path in (ROOT / "policy").glob("*.py"):
        for name in imports(path):
            parts = name.split(".")
            if parts[0] == "components" and len(parts) > 1:
                assert parts[1] in ("gpu", "config"), f"{path.name} imports {name}"


def test_main_only_wires():
    names = {n.split(".")[1] for n in imports(ROOT / "__main__.py") if n.startswith("components.")}
    assert names <= {"config", "platform", "tenant"}


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
    import sys

    return name in sys.stdlib_module_names


def test_release_controller_image_holds_everything_it_runs():
    files, third = closure("components.ops.release.__main__")
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    copies = [
        line.split()[1:-1]
        for line in (ROOT / "components/ops/release/Dockerfile").read_text().splitlines()
        if line.startswith("COPY")
    ]
    copied = [src for srcs in copies for src in srcs]
    for path in files:
        rel = str(path.relative_to(ROOT))
        allowed = False
        for pattern in ignore:  # last match wins, as in .dockerignore
            neg = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(rel, pat) or rel.startswith(pat + "/"):
                allowed = neg
        assert allowed, f"{rel} is needed by the release controller but .dockerignore keeps it out"
        assert any(rel == src or rel.startswith(src.rstrip("/") + "/") for src in copied), f"{rel} is not copied"
    requirements = {
        re.split(r"[=<>]", line)[0].strip()
        for line in (ROOT / "components/ops/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert third, "the closure found no third-party import: the scan is broken"
    for top in third:
        assert DISTRIBUTIONS.get(top, top) in requirements, f"{top} is imported but not installed in the image"
    assert not any(t.startswith("pulumi") for t in third)


# A hand-written poll-until-deadline loop: time arithmetic towards a deadline.
HAND_WAIT = re.compile(r"monotonic\(\)\s*\+|^\s*\w*deadline\w*\s*=")
# Where time arithmetic is the mechanism itself: the one wait helper, and the work queue's
# condition-variable wait (a blocking queue on an injectable clock, not a poll).
WAIT_MECHANISMS = {"components/ops/waiting.py", "components/ops/release/workqueue.py"}


def test_every_wait_goes_through_the_one_helper():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("components", "policy", "bench", "tests", "scripts", "tools")
        for path in sorted((ROOT / top).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in WAIT_MECHANISMS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HAND_WAIT.search(line)
    ]
    assert not found, f"poll with components.ops.waiting.wait_until instead: {found}"


# A kubernetes client model object read by attribute (`pod.spec.scheduler_name`, `.items` of a
# list answer): ops and the providers read every answer as plain JSON (kube.get_json).
MODEL_READ = re.compile(r"\w\.(metadata|spec|status)\.\w|\)\.items\b(?!\()")


def test_ops_read_answers_as_plain_json_only():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("components/ops", "components/providers")
        for path in sorted((ROOT / top).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if MODEL_READ.search(line)
    ]
    assert not found, f"read the answer with components.ops.kube.get_json: {found}"


def test_tiers_share_only_through_tests_support():
    """Tests and benches import what they share from tests/support, never a conftest or another
    tier's modules (tests/support itself included)."""
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for top in ("tests", "bench")
        for path in sorted((ROOT / top).rglob("*.py"))
        for name in imports(path)
        if name.startswith("tests.") and ("conftest" in name or not name.startswith("tests.support"))
    ]
    assert not found, found
