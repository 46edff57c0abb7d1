"""The dev stack's program under the real engine (the project's own Pulumi.yaml and .venv)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration


def test_bad_config_stops_the_preview_with_one_error_and_no_resource(pulumi_cli, project):
    stack_file = project / "Pulumi.dev.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"]["gpu-tenancy:tenants"][0]["quota"]["gpumemMb"] = "10Gi"
    doc["config"]["gpu-tenancy:tenants"][1]["gpu"]["model"] = "H100"
    stack_file.write_text(yaml.safe_dump(doc))
    result = pulumi_cli("preview", cwd=project, check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "invalid stack config (2 problem(s))" in out
    assert "gpu-tenancy:tenants[0].quota.gpumemMb: must be a plain integer in MB" in out
    assert "gpu-tenancy:tenants[1].gpu.model: unknown GPU model 'H100'; allowed: A100-80GB, L4" in out
    assert "Traceback" not in out
    # the program stopped before registering anything: no resource but the stack appears
    for typ in ("docker:", "kubernetes:", "command:", "gpu-tenancy:index:"):
        assert typ not in out, out


def test_dev_stack_preview_needs_the_docker_and_command_plugins(pulumi_cli, project):
    home = Path(pulumi_cli.env.get("PULUMI_HOME", Path.home() / ".pulumi"))
    missing = [
        p
        for p in ("resource-docker-v5.2.0", "resource-command-v1.2.1")
        if not (home / "plugins" / p).exists()
        and not shutil.which(f"pulumi-{p.split('-')[1]}", path=pulumi_cli.env["PATH"])
    ]
    if missing:
        pytest.skip(
            f"plugins {', '.join(missing)} are not installed: the Go module proxy this machine reaches refuses "
            "github.com/pulumi/pulumi-docker/provider/v5 and github.com/pulumi/pulumi-command/provider, so they "
            "cannot be built here (a normal `pulumi` install downloads them)"
        )
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine answers `docker info`: the dev stack's providers need one")
    result = pulumi_cli("preview", cwd=project)
    for name in ("management-k3s", "team-a-cp-tcp", "team-b-hami-release", "team-a-default-shared-a100-bind-release"):
        assert name in result.stdout, result.stdout
