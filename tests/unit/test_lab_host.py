"""The lab's host helpers: lab-runc takes out exactly the capabilities the bounding set lacks (at
create and at exec), and the tunables guard puts back what a kubelet start rewrites."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.docker_lab import TUNABLES, TunablesGuard, read_tunables
from tests.support.waits import settles

ROOT = Path(__file__).resolve().parents[2]
LAB_RUNC = ROOT / "tools/lab/lab-runc"
ALL = [
    "CAP_CHOWN",
    "CAP_SYS_ADMIN",
    "CAP_SYS_RESOURCE",
    "CAP_NET_ADMIN",
    "CAP_BPF",
]
FULL = 0x1FFFFFFFFFF


def fake_runc(tmp: Path) -> Path:
    """A runc that records its arguments."""
    runc = tmp / "runc"
    runc.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp}/args\n')
    runc.chmod(0o755)
    return runc


def run(tmp: Path, bound: int, *args: str) -> None:
    env = dict(os.environ, LAB_RUNC=str(fake_runc(tmp)), LAB_RUNC_CAPBND=f"{bound:x}")
    subprocess.run([str(LAB_RUNC), *args], env=env, check=True, cwd=tmp)


def caps(process: dict) -> dict[str, list[str]]:
    return process["capabilities"]


pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="no jq (apt-get install jq): lab-runc needs it")


@pytest.mark.parametrize("missing", [[], ["CAP_SYS_RESOURCE"], ["CAP_SYS_RESOURCE", "CAP_BPF"]])
def test_create_drops_what_the_bounding_set_lacks_and_nothing_else(tmp_path, missing):
    numbers = {"CAP_SYS_RESOURCE": 24, "CAP_BPF": 39}
    bound = FULL
    for cap in missing:
        bound &= ~(1 << numbers[cap])
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    sets = {k: list(ALL) for k in ("bounding", "effective", "permitted", "inheritable")}
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": sets, "args": ["sh"]}}))
    run(tmp_path, bound, "--root", "/run/x", "create", "--bundle", str(bundle), "cid")
    got = caps(json.loads((bundle / "config.json").read_text())["process"])
    assert got == {k: [c for c in ALL if c not in missing] for k in sets}
    assert (tmp_path / "args").read_text().split() == ["--root", "/run/x", "create", "--bundle", str(bundle), "cid"]


@pytest.mark.parametrize("missing", [[], ["CAP_SYS_RESOURCE"], ["CAP_SYS_RESOURCE", "CAP_BPF"]])
def test_it_says_which_capabilities_the_host_lacks(missing):
    """The one check tools/lab/docker.sh and the node image's setup make before using lab-runc."""
    bound = FULL
    for cap in missing:
        bound &= ~(1 << {"CAP_SYS_RESOURCE": 24, "CAP_BPF": 39}[cap])
    env = dict(os.environ, LAB_RUNC_CAPBND=f"{bound:x}")
    out = subprocess.run([str(LAB_RUNC), "--missing-capabilities"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == missing


def test_exec_drops_them_from_the_process_file(tmp_path):
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": {"bounding": ALL, "effective": ALL}}))
    run(tmp_path, FULL & ~(1 << 24), "exec", "--process", str(process), "--detach", "cid")
    assert caps(json.loads(process.read_text())) == {
        "bounding": [c for c in ALL if c != "CAP_SYS_RESOURCE"],
        "effective": [c for c in ALL if c != "CAP_SYS_RESOURCE"],
    }


def test_other_commands_pass_through_untouched(tmp_path):
    run(tmp_path, FULL & ~(1 << 24), "state", "cid")
    assert (tmp_path / "args").read_text().split() == ["state", "cid"]


def test_the_guard_puts_back_what_a_kubelet_start_rewrites(tmp_path):
    """On a stand-in /proc/sys: a kubelet's writes (panic 10, panic_on_oops 1, overcommit 1) undone."""
    for key, value in zip(TUNABLES, ("1", "0", "0"), strict=True):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text(value + "\n")
    guard = TunablesGuard(proc_sys=tmp_path, interval=0.2)
    try:
        for key, value in zip(TUNABLES, ("10", "1", "1"), strict=True):
            (tmp_path / key).write_text(value + "\n")
        kept = dict(zip(TUNABLES, ("1", "0", "0"), strict=True))
        assert settles(lambda: read_tunables(tmp_path) == kept, timeout=10, interval=0.1), guard.lines
    finally:
        guard.stop()
    said = {line.split()[1] for line in guard.restored}
    assert said == {"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory"}, guard.lines
