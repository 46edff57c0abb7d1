"""The Pulumi provider plugins the stack's Docker side needs (docker, command), at the versions of
the installed SDKs, which is what the engine asks for. A normal install downloads them; where
that cannot happen they are given as a directory of executables (GPU_TENANCY_PROVIDER_PLUGINS),
each checked to serve the pinned schema version, then installed into a PULUMI_HOME of the test's
own beside the plugins the given home has (the tools' home ignores plugins on PATH), so nothing is
left installed behind it."""

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


def provider_plugins(env: dict[str, str], scratch: Path) -> dict[str, str]:
    """`env` with the plugins reachable by the engine: as they are when installed under its
    PULUMI_HOME, else a home made in `scratch` (the given home's plugins hard-linked in, the
    directory ENV names installed); skips naming each plugin that is neither, or that serves
    another version than the SDK's."""
    home = Path(env.get("PULUMI_HOME", Path.home() / ".pulumi"))
    wanted = {n: v for n, v in pinned().items() if not installed(home, n, v)}
    if not wanted:
        return env
    where = os.environ.get(ENV, "")
    absent = [n for n in wanted if not (where and os.access(Path(where, f"pulumi-resource-{n}"), os.X_OK))]
    if absent:
        pytest.skip(
            f"no {', '.join(f'pulumi-resource-{n} v{wanted[n]}' for n in absent)}: not installed under "
            f"{home / 'plugins'} and not in {ENV} (a directory of pulumi-resource-* executables)"
        )
    for name, ver in wanted.items():
        served = schema_version(env, Path(where, f"pulumi-resource-{name}"))
        if served != ver:
            pytest.skip(f"{ENV}/pulumi-resource-{name} serves {name} {served}, the SDK asks for {ver}")
    own = scratch / "pulumi-home"
    (own / "plugins").mkdir(parents=True)
    for plugin in (home / "plugins").glob("*") if (home / "plugins").is_dir() else ():
        if plugin.is_dir():  # the engine takes no symbolic link for a plugin's directory: hard links
            shutil.copytree(plugin, own / "plugins" / plugin.name, copy_function=_link)
    out = {**env, "PULUMI_HOME": str(own)}
    for name, ver in wanted.items():
        subprocess.run(
            [
                _pulumi(env),
                "plugin",
                "install",
                "resource",
                name,
                ver,
                "--file",
                str(Path(where, f"pulumi-resource-{name}")),
            ],
            env=out,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return out


def schema_version(env: dict[str, str], plugin: Path) -> str:
    """The version a plugin's schema declares (`pulumi package get-schema`)."""
    proc = subprocess.run(
        [_pulumi(env), "package", "get-schema", str(plugin)], env=env, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        pytest.skip(f"{plugin} does not serve a schema: {proc.stderr.strip()[-300:]}")
    return str(json.loads(proc.stdout).get("version", ""))


def _pulumi(env: dict[str, str]) -> str:
    pulumi = shutil.which("pulumi", path=env["PATH"])
    if pulumi is None:
        pytest.skip("no pulumi CLI (tools/build.sh)")
    return pulumi


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)
