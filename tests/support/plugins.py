"""The Pulumi provider plugins the stack's Docker side needs (docker, command), at the versions of
the installed SDKs, which is what the engine asks for. A normal install downloads them; where
that cannot happen they are given as a directory of executables (GPU_TENANCY_PROVIDER_PLUGINS),
put on the engine's PATH, and each is checked to serve the pinned schema version first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

ENV = "GPU_TENANCY_PROVIDER_PLUGINS"
# plugin name -> the SDK distribution whose version the engine asks for
SDKS = {"docker": "pulumi-docker", "command": "pulumi-command"}


def pinned() -> dict[str, str]:
    return {name: version(sdk) for name, sdk in SDKS.items()}


def installed(home: Path, name: str, ver: str) -> bool:
    return (home / "plugins" / f"resource-{name}-v{ver}").is_dir()


def provider_plugins(env: dict[str, str]) -> dict[str, str]:
    """`env` with the plugins reachable by the engine (installed under PULUMI_HOME, or the
    directory ENV names first on PATH); skips naming each plugin that is neither, or that serves
    another version than the SDK's."""
    home = Path(env.get("PULUMI_HOME", Path.home() / ".pulumi"))
    wanted = {n: v for n, v in pinned().items() if not installed(home, n, v)}
    if not wanted:
        return env
    where = os.environ.get(ENV, "")
    absent = [
        f"pulumi-resource-{n} v{v}"
        for n, v in wanted.items()
        if not os.access(Path(where, f"pulumi-resource-{n}"), os.X_OK)
    ]
    if not where or absent:
        pytest.skip(
            f"no {', '.join(absent or wanted)}: not installed under {home / 'plugins'} and not in {ENV} "
            "(a directory of pulumi-resource-* executables)"
        )
    out = dict(env)
    for name, ver in wanted.items():
        served = schema_version(env, Path(where, f"pulumi-resource-{name}"))
        if served != ver:
            pytest.skip(f"{ENV}/pulumi-resource-{name} serves {name} {served}, the SDK asks for {ver}")
    out["PATH"] = f"{where}{os.pathsep}{env['PATH']}"
    return out


def schema_version(env: dict[str, str], plugin: Path) -> str:
    """The version a plugin's schema declares (`pulumi package get-schema`)."""
    pulumi = shutil.which("pulumi", path=env["PATH"])
    if pulumi is None:
        pytest.skip("no pulumi CLI (tools/build.sh)")
    proc = subprocess.run(
        [pulumi, "package", "get-schema", str(plugin)], env=env, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        pytest.skip(f"{plugin} does not serve a schema: {proc.stderr.strip()[-300:]}")
    return str(json.loads(proc.stdout).get("version", ""))
