"""The folders are the architecture: each room imports only the rooms below it and none below the
providers imports Pulumi (import-linter's contracts in pyproject.toml), and the controllers' image
holds exactly the code it runs."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

from tests.support.image_contents import image_files, imports, module_file

ROOT = Path(__file__).resolve().parents[2]
# Import name -> requirement name, for what the controllers' image installs.
DISTRIBUTIONS = {"kubernetes": "kubernetes", "yaml": "PyYAML", "prometheus_client": "prometheus-client"}
DOCKERFILE = ROOT / "components/controllers/release/Dockerfile"


def test_rooms_keep_their_contracts():
    """import-linter's contracts (pyproject.toml): layers, no Pulumi below the providers,
    matplotlib in the reports only. In a process of its own: it configures logging globally."""
    code = "from importlinter.cli import lint_imports; raise SystemExit(lint_imports(no_cache=True))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


def test_policy_pack_imports_domain_and_config_only():
    for path in (ROOT / "policy").glob("*.py"):
        for name in imports(path):
            parts = name.split(".")
            if parts[0] == "components" and len(parts) > 1:
                assert parts[1] in ("domain", "config"), f"{path.name} imports {name}"


def test_main_only_wires():
    names = {n.split(".")[1] for n in imports(ROOT / "__main__.py") if n.startswith("components.")}
    assert names <= {"config", "platform", "tenant"}


def test_the_controllers_image_copies_exactly_the_code_it_runs():
    """Derived from the imports: every module the programs need is copied into its own folder,
    and nothing else is (no report, no Pulumi component, no matplotlib)."""
    files, _ = image_files()
    copies = [line.split()[1:] for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY ")]
    copied: set[str] = set()
    for *sources, dest in copies:
        if sources == ["components/controllers/release/requirements.txt"]:
            continue
        for src in sources:
            assert dest == f"/app/{Path(src).parent}/", f"COPY {src} goes to {dest}"
            copied.add(src)
    expected = "\n".join(
        f"COPY {' '.join(sorted(f for f in files if str(Path(f).parent) == d))} /app/{d}/"
        for d in sorted({str(Path(f).parent) for f in files})
    )
    assert copied == files, f"the Dockerfile's COPY lines should be:\n{expected}"


def test_the_build_context_lets_in_exactly_what_the_image_copies():
    files, _ = image_files()
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]

    def allowed(rel: str) -> bool:
        verdict = False
        for pattern in lines:  # the last match wins, as in .dockerignore
            pat = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(rel, pat) or rel.startswith(pat + "/"):
                verdict = pattern.startswith("!")
        return verdict

    tracked = {str(p.relative_to(ROOT)) for p in ROOT.glob("components/**/*") if p.is_file()}
    tracked |= {"Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "requirements.txt"}
    let_in = {rel for rel in tracked if allowed(rel) and "__pycache__" not in rel}
    assert let_in == files | {"components/controllers/release/requirements.txt"}


def test_the_image_installs_exactly_what_its_code_imports():
    _, third = image_files()
    requirements = {
        re.split(r"[=<>]", line)[0].strip()
        for line in (ROOT / "components/controllers/release/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert third, "the closure found no third-party import: the scan is broken"
    assert {DISTRIBUTIONS.get(top, top) for top in third} == requirements
    assert not any(t.startswith("pulumi") or t == "matplotlib" for t in third)


# A hand-written poll-until-deadline loop: time arithmetic towards a deadline.
HAND_WAIT = re.compile(r"monotonic\(\)\s*\+|^\s*\w*deadline\w*\s*=")
# Where time arithmetic is the mechanism itself: the one wait helper, and the work queue's
# condition-variable wait (a blocking queue on an injectable clock, not a poll).
WAIT_MECHANISMS = {"components/kube/waiting.py", "components/controllers/release/workqueue.py"}


def test_every_wait_goes_through_the_one_helper():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("components", "policy", "bench", "tests", "scripts", "tools")
        for path in sorted((ROOT / top).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in WAIT_MECHANISMS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HAND_WAIT.search(line)
    ]
    assert not found, f"poll with components.kube.waiting.wait_until instead: {found}"


# A kubernetes client model object read by attribute (`pod.spec.scheduler_name`, `.items` of a
# list answer): ops and the providers read every answer as plain JSON (kube.get_json).
MODEL_READ = re.compile(r"\w\.(metadata|spec|status)\.\w|\)\.items\b(?!\()")


def test_api_answers_are_read_as_plain_json_only():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in (
            "components/kube",
            "components/lifecycle",
            "components/controllers",
            "components/reports",
            "components/providers",
        )
        for path in sorted((ROOT / top).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if MODEL_READ.search(line)
    ]
    assert not found, f"read the answer with components.kube.client.get_json: {found}"


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


def test_every_provider_s_back_end_has_its_name():
    """A provider is thin; what it runs sits in the back-end module of the same stem, which it imports."""
    for path in sorted((ROOT / "components/providers").glob("*.py")):
        if path.stem in ("__init__", "base"):
            continue
        back_ends = [f"components.{room}.{path.stem}" for room in ("lifecycle", "kube", "config")]
        found = [name for name in back_ends if module_file(name)]
        assert len(found) == 1, f"{path.name}: no single back-end among {back_ends}"
        assert any(n == found[0] or n.startswith(found[0] + ".") for n in imports(path)), (path.name, found[0])


def test_no_room_holds_more_than_a_fifth_of_the_program():
    """Rooms stay small enough to name what they hold: none over a fifth of the program's lines."""

    def lines(paths: list[Path]) -> int:
        return sum(len(p.read_text().splitlines()) for p in paths)

    program = [*ROOT.glob("components/**/*.py"), *ROOT.glob("policy/*.py"), ROOT / "__main__.py"]
    total = lines(program)
    rooms = {p.name: lines(list(p.rglob("*.py"))) for p in (ROOT / "components").iterdir() if p.is_dir()}
    assert rooms and total > 0
    big = {room: f"{n / total:.0%}" for room, n in rooms.items() if n > total / 5}
    assert not big, f"rooms over a fifth of {total} lines: {big}"
