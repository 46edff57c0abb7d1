"""`gpu-tenancy`, the one console script: every tool behind a subcommand, each with its own help."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from components import cli

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_declares_the_console_script():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"gpu-tenancy": "components.cli:main"}


def test_the_installed_script_runs():
    """scripts/setup-venv.sh installs the project (editable): the script is on the venv's PATH."""
    script = Path(sys.prefix) / "bin" / "gpu-tenancy"
    assert script.is_file(), f"{script} missing: run scripts/setup-venv.sh"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "commands:" in proc.stdout, proc.stderr
    assert all(name in proc.stdout for name in cli.COMMANDS)


@pytest.mark.parametrize("name", [n for n in cli.COMMANDS if n != "scrape"])
def test_each_command_has_its_own_help_under_its_name(name, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: gpu-tenancy {name}")


def test_scrape_names_itself_in_its_usage(capsys):
    assert cli.main(["scrape", "/metrics", "extra"]) == 2
    assert capsys.readouterr().err.startswith("usage: gpu-tenancy scrape ")


def test_no_command_or_an_unknown_one_says_so_in_one_line(capsys):
    assert cli.main([]) == 2
    assert "commands:" in capsys.readouterr().err
    assert cli.main(["capacty"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown command 'capacty'" in err and "capacity" in err


def test_a_command_imports_only_its_own_module():
    """The reports (and their plotting library) stay out of the other commands."""
    code = (
        "import sys; from components import cli; cli.main(['scrape', 'a', 'b']); "
        "print(any(m.startswith(('components.reports', 'matplotlib')) for m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.parametrize("name", [n for n in cli.COMMANDS if n != "scrape"])
def test_every_command_s_help_says_what_it_does_in_whole_sentences(name, capsys):
    """The description is the module's first paragraph, whole: never a line cut mid-sentence."""
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    description = " ".join(text.split("\n\n")[1].split())
    assert description.endswith((".", ")")) and not description.endswith(":"), description
