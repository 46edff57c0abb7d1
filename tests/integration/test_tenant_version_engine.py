"""The tenant version gate under the real engine: `pulumi preview` refuses a step Kamaji's
webhook would refuse (down, a minor skipped, above Kamaji's kubeadm) naming the key, before
anything is touched; one minor up passes and becomes the version the next step is judged from."""

from __future__ import annotations

from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "tenant_version"
pytestmark = pytest.mark.integration


@pytest.fixture
def stack(pulumi_cli, tmp_path):
    work = tmp_path / "program"
    work.mkdir()
    for f in PROGRAM.iterdir():
        (work / f.name).write_text(f.read_text())
    pulumi_cli("stack", "init", "test", cwd=work)
    yield work
    pulumi_cli("destroy", "--yes", "--skip-preview", cwd=work, check=False)


def at(pulumi_cli, work: Path, version: str, verb: str = "preview"):
    pulumi_cli("config", "set", "version", version, cwd=work)
    args = ("up", "--yes", "--skip-preview") if verb == "up" else ("preview",)
    return pulumi_cli(*args, cwd=work, check=False)


def test_preview_refuses_what_kamaji_would_refuse(pulumi_cli, stack):
    assert at(pulumi_cli, stack, "v1.37.0").returncode != 0  # a new tenant above Kamaji's minor
    assert at(pulumi_cli, stack, "v1.35.1", "up").returncode == 0
    refusals = {
        "v1.34.2": "unable to downgrade a TenantControlPlane from 1.35.0 to 1.34.0",
        "v1.37.0": "unable to upgrade to a version greater than the supported one (v1.36)",
    }
    for version, reason in refusals.items():
        out = at(pulumi_cli, stack, version)
        assert out.returncode != 0, out.stdout
        assert f"tenant team-a: kubernetesVersion: {reason}" in out.stdout + out.stderr, out.stdout + out.stderr
    assert at(pulumi_cli, stack, "v1.35.7").returncode == 0  # a patch within the minor
    step = at(pulumi_cli, stack, "v1.36.0", "up")
    assert step.returncode == 0, step.stdout + step.stderr
    back = at(pulumi_cli, stack, "v1.35.1")
    assert "unable to downgrade a TenantControlPlane from 1.36.0 to 1.35.0" in back.stdout + back.stderr
    pulumi_cli("config", "set", "version", "v1.36.0", cwd=stack)
    pulumi_cli("preview", "--expect-no-changes", cwd=stack)
