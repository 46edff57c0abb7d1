"""The pull-request workflow: linted by actionlint (built by tools/build.sh), and its merge job
previews with the policy pack before it applies, on the lab's self-hosted runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.tools import tools_env

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github/workflows/pulumi.yml"


def test_actionlint_finds_nothing():
    env = tools_env()
    actionlint = shutil.which("actionlint", path=env["PATH"])
    if actionlint is None:
        pytest.skip("not built: actionlint (run tools/build.sh)")
    proc = subprocess.run([actionlint, "-no-color", str(WORKFLOW)], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_merge_previews_with_the_pack_before_it_applies():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    up = jobs["up"]
    assert up["runs-on"] == ["self-hosted", "gpu-lab"]
    actions = [s for s in up["steps"] if str(s.get("uses", "")).startswith("pulumi/actions")]
    assert [a["with"]["command"] for a in actions] == ["preview", "up"]
    assert all(a["with"]["policyPacks"] == "policy" for a in actions)
    preview = jobs["preview"]["steps"][-2]
    assert preview["with"]["command"] == "preview" and preview["with"]["policyPacks"] == "policy"


def test_no_expression_is_interpolated_into_a_shell_line():
    """`${{ }}` in a `run:` is pasted into the script before the shell parses it (a stack file
    named `x;curl ...` would run): every value reaches the shell through `env:` instead."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    found = [
        f"{job}: {step.get('name') or step['run'][:40]}"
        for job, spec in jobs.items()
        for step in spec.get("steps", [])
        if "${{" in str(step.get("run", ""))
    ]
    assert not found, found
