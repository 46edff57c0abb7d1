"""The offline config check (`gpu-tenancy check`, `python -m components.config.check`): every
stack file the project ships passes; each finding a newcomer met is named, in one run, in the
words `up` uses; exit codes 0 (valid, warnings allowed), 1 (problems), 2 (no stack file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from components import cli
from components.config import check
from tests.support.harness import run_program

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*ROOT.glob("Pulumi.*.yaml"), *ROOT.glob("examples/Pulumi.*.yaml")])

TENANT = """\
    - name: {name}
      pools: [{{name: worker, mode: docker, nodes: 1}}]
      gpu: {{model: A100-80GB, cardsPerNode: 1}}
      quota: {quota}
      apiPort: {port}
      konnectivityPort: {kport}
      podCidr: 10.{net}.0.0/16
"""
CLUSTER = """\
  gpu-tenancy:cluster:
    mode: docker
    name: gpu-lab
    subnet: 172.30.0.0/24
    managementIp: 172.30.0.2
"""


def tenant(name: str, i: int, quota: str = "{gpus: 1, gpumemMb: 81920, gpucoresPercent: 100}") -> str:
    return TENANT.format(name=name, quota=quota, port=31443 + i, kport=31132 + i, net=244 + i)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    return tmp_path


def run(project: Path, body: str, capsys) -> tuple[int, str]:
    (project / "Pulumi.lab.yaml").write_text(body)
    code = check.main(["--stack", "lab"], root=project)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_stack_file_the_project_ships_checks_valid(path: Path, capsys):
    code = check.main(["--stack", str(path)], root=ROOT)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "valid" in out.splitlines()[-1] and "error:" not in out


def test_a_stack_s_name_and_its_file_are_the_same_stack(capsys):
    assert check.main(["--stack", "dev"], root=ROOT) == 0
    by_name = capsys.readouterr().out
    assert check.main(["--stack", str(ROOT / "Pulumi.dev.yaml")], root=ROOT) == 0
    assert capsys.readouterr().out.splitlines()[-1] == by_name.splitlines()[-1]


def test_a_mistyped_project_prefix_is_named_and_the_config_is_refused(project, capsys):
    body = "config:\n" + CLUSTER + "  gpu-tenacy:tenants:\n" + tenant("team-a", 0)
    code, out = run(project, body, capsys)
    assert code == 1
    assert "warning: gpu-tenacy:tenants: not a key of project 'gpu-tenancy'" in out
    assert "did you mean gpu-tenancy:tenants?" in out
    assert "error: gpu-tenancy:tenants: is required" in out


def test_an_unknown_key_of_the_project_is_a_warning(project, capsys):
    body = "config:\n" + CLUSTER + "  gpu-tenancy:tenant:\n    - x\n  gpu-tenancy:tenants:\n" + tenant("team-a", 0)
    code, out = run(project, body, capsys)
    assert code == 0, out
    assert "warning: gpu-tenancy:tenant: unknown key, ignored" in out


def test_a_yaml_alias_that_gives_two_tenants_one_quota_is_a_warning(project, capsys):
    quota = "&q {gpus: 1, gpumemMb: 81920, gpucoresPercent: 100}"
    body = "config:\n" + CLUSTER + "  gpu-tenancy:tenants:\n" + tenant("team-a", 0, quota) + tenant("team-b", 1, "*q")
    code, out = run(project, body, capsys)
    assert code == 0, out
    assert "warning: gpu-tenancy:tenants[1].quota: the same values as gpu-tenancy:tenants[0].quota" in out


def test_a_quota_ten_times_the_fleet_is_a_warning(project, capsys):
    quota = "{gpus: 10, gpumemMb: 819200, gpucoresPercent: 1000}"
    body = "config:\n" + CLUSTER + "  gpu-tenancy:tenants:\n" + tenant("team-a", 0, quota)
    code, out = run(project, body, capsys)
    assert code == 0, out
    assert "quota.gpumemMb: 819200 is 737280 above what the fleet holds" in out
    assert "1 tenant): valid, 3 warning(s)" in out or "valid," in out.splitlines()[-1]


def test_mistakes_in_every_section_are_reported_in_one_run(project, capsys):
    """Field and cross-field problems together, wherever the fields parsed."""
    cluster = CLUSTER.replace("172.30.0.2", "10.0.0.9")  # outside the subnet (cross-field)
    hami = "  gpu-tenancy:hami:\n    kubeQps: 50\n    kubeBurst: 10\n"  # burst below qps (cross-field)
    tenants = (
        tenant("team-a", 0, "{gpus: -1, gpumemMb: 81920, gpucoresPercent: 100}")  # field
        + tenant("team-b", 1).replace("A100-80GB", "H900")  # field
        + tenant("team-c", 2).replace("apiPort: 31445", "apiPort: 31443")  # cross-field: team-a's port
    )
    body = "config:\n" + cluster + hami + "  gpu-tenancy:tenants:\n" + tenants + "  gpu-tenancy:role: lab\n"
    code, out = run(project, body, capsys)
    assert code == 1
    keys = [line.split(": ", 2)[1] for line in out.splitlines() if line.startswith("error: ")]
    assert "gpu-tenancy:cluster.managementIp" in keys
    assert "gpu-tenancy:hami.kubeBurst" in keys
    assert "gpu-tenancy:tenants[0].quota.gpus" in keys
    assert any(k.startswith("gpu-tenancy:tenants[1].gpu") for k in keys)
    assert any("apiPort" in k for k in keys), keys
    assert len(keys) >= 5


def test_a_secret_the_file_does_not_hold_is_a_warning_naming_how_to_set_it(project, capsys):
    body = "config:\n" + CLUSTER.replace("mode: docker", "mode: kubeconfig") + "  gpu-tenancy:tenants:\n"
    code, out = run(project, body + tenant("team-a", 0), capsys)
    assert code == 0, out
    assert "warning: gpu-tenancy:kubeconfig: a secret this file does not hold; `up` needs it: pulumi config" in out
    body += tenant("team-a", 0) + "  gpu-tenancy:kubeconfig:\n    secure: v1:abc\n"
    code, out = run(project, body, capsys)
    assert code == 0 and "kubeconfig" not in out


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (None, "no stack"),
        ("config: [1, 2\n", "not valid YAML (line"),
        ("config: 3\n", "`config:` is not a mapping"),
    ],
)
def test_what_is_not_a_stack_file_exits_2_in_one_line(project, capsys, body, why):
    if body is not None:
        (project / "Pulumi.lab.yaml").write_text(body)
    code = check.main(["--stack", "lab"], root=project)
    err = capsys.readouterr().err
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err


def test_up_and_the_check_say_the_same_words(project, capsys):
    body = "config:\n" + CLUSTER + "  gpu-tenancy:tenants:\n" + tenant("team-a", 0, "{gpus: -1}")
    code, out = run(project, body, capsys)
    assert code == 1
    config = yaml.safe_load(body)["config"]
    with pytest.raises(Exception) as refused:
        run_program(config)
    for line in out.splitlines():
        if line.startswith("error: "):
            assert line.removeprefix("error: ") in str(refused.value), line


def test_the_console_script_has_the_check():
    assert cli.COMMANDS["check"][0] == "components.config.check"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize(
    "tool",
    [
        ("components.reports.capacity_report", []),
        ("components.reports.plan_comparison", ["--plan", "a=2xA100-80GB", "--plan", "b=4xL4"]),
        ("components.reports.image_list", []),
    ],
    ids=lambda t: t[0].rsplit(".", 1)[-1],
)
def test_every_offline_tool_takes_every_shipped_stack_file(path: Path, tool, capsys):
    """No secret demanded that a tool never reads; a stack without tenants says so and exits 0."""
    import importlib

    module, extra = tool
    code = importlib.import_module(module).main(["--stack", str(path), *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    if "platform" in path.name and "image_list" not in module:
        assert "no tenants here" in out.out


def test_live_without_the_pulumi_cli_says_in_one_line_what_is_missing(monkeypatch, tmp_path, capsys):
    from components.reports import capacity_report

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GPU_TENANCY_CACHE", str(tmp_path / "cache"))
    assert capacity_report.main(["--stack", "dev", "--live"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pulumi CLI: not on PATH nor in" in err and "tools/build.sh" in err


def test_the_shipped_stacks_that_make_a_lab_network_can_run_side_by_side():
    """Each stack file that makes its own Docker network (not a team's: it joins its platform's)
    names a network and a subnet no other shipped stack uses."""
    from components.config.load import load_stack_file

    seen: dict[str, str] = {}
    for path in SHIPPED:
        cfg = load_stack_file(path, secrets_set=True)
        if cfg.role == "team":
            continue
        for what in (f"name {cfg.cluster.name}", f"subnet {cfg.cluster.subnet}"):
            assert what not in seen, f"{path.name} and {seen[what]} both use the Docker network {what}"
            seen[what] = path.name
