"""A newcomer's first hour, offline: a fresh copy of the project on a machine without Docker, set
up with the README's one command, then every offline tool the README shows, run as written, and
the picture; each exits as the README says. The set-up installs from the package index (the
wheels pip has seen are reused), so this takes about a minute."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.readme import offline_block

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The project's tracked files as they stand, in a folder of their own, on a PATH whose
    docker has no engine: what a newcomer has after `git clone` on a laptop without Docker."""
    clone = tmp_path_factory.mktemp("newcomer") / "gpu-tenancy"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    fake = clone.parent / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (fake / "docker").chmod(0o755)
    python_bin = Path(sys.base_prefix) / "bin"  # the interpreter this project runs on, as python3
    env = {**os.environ, "PATH": f"{fake}:{python_bin}:/usr/bin:/bin"}
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PULUMI_HOME"):
        env.pop(var, None)
    return clone, env


def test_the_readme_s_offline_hour_runs_as_written_on_a_fresh_copy(newcomer):
    clone, env = newcomer
    steps = offline_block()
    assert steps[0] == "bash scripts/setup-venv.sh requirements-dev.txt"
    for step in steps:
        done = subprocess.run(step.split(), cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"`{step}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if step.startswith(".venv/bin/gpu-tenancy"):
            assert done.stdout.strip(), step
            assert "Traceback" not in done.stderr, done.stderr
    # the console script is the copy's own, not this checkout's
    script = (clone / ".venv" / "bin" / "gpu-tenancy").read_text().splitlines()[0]
    assert script == f"#!{clone / '.venv' / 'bin' / 'python'}", script


def test_the_picture_and_a_broken_stack_file_exit_as_documented(newcomer):
    clone, env = newcomer
    tool = clone / ".venv" / "bin" / "gpu-tenancy"
    if not tool.exists():
        pytest.skip("the set-up of the test above did not run")
    drawn = subprocess.run(
        [str(tool), "capacity", "--stack", "examples/Pulumi.mixed-lab.yaml", "--picture", "pictures"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert sorted(p.name for p in (clone / "pictures").iterdir()) == ["team-a.png", "team-a.svg"]
    broken = clone / "Pulumi.broken.yaml"
    broken.write_text((clone / "Pulumi.dev.yaml").read_text().replace("gpumemMb: 163840", "gpumemMb: 160Gi"))
    checked = subprocess.run(
        [str(tool), "check", "--stack", "broken"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert (
        checked.returncode == 1 and "gpu-tenancy:tenants[0].quota.gpumemMb: must be a plain integer" in checked.stdout
    )
    missing = subprocess.run(
        [str(tool), "check", "--stack", "nope"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "no stack 'nope'" in missing.stderr
