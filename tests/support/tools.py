"""What the integration tier, the engine tests and the benches share: where tools/build.sh put
the upstream binaries, a skip that names the missing one, and `pulumi` on a file backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("GPU_TENANCY_CACHE", Path.home() / ".cache" / "gpu-tenancy"))
PASSPHRASE = "integration-tests-only"


def tools_env() -> dict[str, str]:
    """The environment tools/build.sh wrote (PATH with the built binaries, PULUMI_HOME)."""
    env = dict(os.environ)
    env_file = CACHE / "env.sh"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export ") :].partition("=")
                value = value.strip('"').replace("$PATH", env.get("PATH", ""))
                env[key] = value
    return env


def path_without(names: tuple[str, ...], path: str, farm: Path) -> str:
    """A PATH of one folder (`farm`) linking every executable `path` finds first, but none whose
    name starts with one of `names`: a machine where, say, `docker` is not installed."""
    farm.mkdir(parents=True, exist_ok=True)
    for folder in path.split(os.pathsep):
        if not folder or not Path(folder).is_dir():
            continue
        for entry in Path(folder).iterdir():
            link = farm / entry.name
            if entry.name.startswith(names) or link.exists() or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry, os.X_OK):
                link.symlink_to(entry.resolve())
    return str(farm)


def executable_from_env(env: str) -> str | None:
    """The executable an environment variable names (a real-upstream tier's binary), or None."""
    path = os.environ.get(env)
    return path if path and os.access(path, os.X_OK) else None


def require(env: dict[str, str], *binaries: str, skip: Callable[[str], object] = pytest.skip) -> None:
    """Skip (or `skip`: a tier that must not skip fails instead) naming the binaries not built."""
    missing = [b for b in binaries if shutil.which(b, path=env["PATH"]) is None]
    if missing:
        skip(f"not built: {', '.join(missing)} (run tools/build.sh; cache {CACHE})")


class PulumiCli:
    """`pulumi` with a file backend in a temp dir, a passphrase and the project on PYTHONPATH."""

    def __init__(self, env: dict[str, str], state: Path):
        self.env = dict(env)
        self.env.update(
            {
                "PULUMI_BACKEND_URL": f"file://{state}",
                "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
                "PULUMI_PYTHON_CMD": sys.executable,
                "PYTHONPATH": str(ROOT),
                "PULUMI_SKIP_UPDATE_CHECK": "true",
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            }
        )

    def new_stack(self, program: Path, work: Path, kubeconfig: str | None, stack: str = "test") -> Path:
        """A copy of a test program in `work`, its stack made, `kubeconfig` (where given) set as a secret."""
        work.mkdir(parents=True, exist_ok=True)
        for f in program.iterdir():
            if f.is_file():
                (work / f.name).write_text(f.read_text())
        self("stack", "init", stack, cwd=work)
        if kubeconfig is not None:
            self("config", "set", "--secret", "kubeconfig", kubeconfig, cwd=work)
        return work

    def __call__(
        self, *args: str, cwd: Path, check: bool = True, timeout: float = 600, stdin: str | None = None
    ) -> subprocess.CompletedProcess:
        """`stdin`: what the command reads (a secret's value is given so, never as an argument)."""
        proc = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=cwd,
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc
