"""The dev stack's program under the real engine (the project's own Pulumi.yaml and .venv)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.support.plugins import provider_plugins

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


def test_dev_stack_previews_with_the_docker_and_command_plugins(pulumi_cli, project, tmp_path):
    pulumi_cli.env = provider_plugins(pulumi_cli.env, tmp_path)
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine answers `docker info`: the dev stack's providers need one")
    result = pulumi_cli("preview", "--stack", "dev", cwd=project)  # a home of its own: no stack selected
    for name in (
        "management-node",
        "management-init",
        "team-a-cp-tcp",
        "team-b-hami-release",
        "team-b-hami-webhook-certificate",  # a dynamic provider: its preview runs its diff
        "team-b-hami-webhook-ca",
    ):
        assert name in result.stdout, result.stdout
