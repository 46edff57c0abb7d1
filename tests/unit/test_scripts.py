"""The README's main command on a machine without a Docker engine: it says so within seconds,
before building or installing anything, and leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fresh_clone(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A fresh clone (no .venv, no built tools, no passphrase yet) and a PATH whose docker has no
    engine and whose slow tools only record that they ran."""
    fake = tmp_path / "bin"
    fake.mkdir()
    docker = fake / "docker"
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    marker = tmp_path / "slow-step-ran"
    for slow in ("go", "python3", "pulumi", "pip"):  # anything slow would go through one of these
        stub = fake / slow
        stub.write_text(f"#!/bin/sh\necho {slow} >> {marker}\nexit 1\n")
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:/usr/bin:/bin"}
    env.pop("PULUMI_CONFIG_PASSPHRASE", None)
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    clone = tmp_path / "clone"
    for rel in (
        "scripts",
        "tools",
        "requirements.txt",
        "policy/requirements.txt",
        "components/controllers/release/requirements.txt",
    ):
        src, dst = ROOT / rel, clone / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    return clone, env, marker


CLONED = ["components", "policy", "requirements.txt", "scripts", "tools"]


def test_up_dev_without_docker_fails_fast_with_the_docker_message(tmp_path):
    clone, env, marker = fresh_clone(tmp_path)
    proc = subprocess.run(["bash", "scripts/up-dev.sh"], cwd=clone, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "no Docker engine answers" in proc.stderr
    assert not marker.exists(), f"ran before the Docker check: {marker.read_text()}"
    assert sorted(p.name for p in clone.iterdir()) == CLONED


@pytest.mark.parametrize("var", ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"])
def test_a_passphrase_variable_set_but_empty_is_refused_before_anything_runs(tmp_path, var):
    clone, env, marker = fresh_clone(tmp_path)
    proc = subprocess.run(
        ["bash", "scripts/up-dev.sh"], cwd=clone, env={**env, var: ""}, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1
    assert f"error: {var} is set but empty" in proc.stderr and "Docker" not in proc.stderr
    assert not marker.exists() and sorted(p.name for p in clone.iterdir()) == CLONED


def test_passphrase_and_kubeconfigs_stay_out_of_git():
    paths = [".pulumi-passphrase", "team-a.kubeconfig", ".pulumi-state/x", ".venv/bin/python"]
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert ignored == paths


def test_a_virtualenv_that_is_a_symlink_stays_out_of_git(tmp_path):
    """A second worktree often links the first one's .venv: a `.venv/` pattern matches directories
    only, and `git add -A` would commit the link (checking it out replaces a real .venv)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    (tmp_path / ".venv").symlink_to(tmp_path / "elsewhere")
    proc = subprocess.run(["git", "check-ignore", ".venv"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.stdout.split() == [".venv"], proc.stderr
