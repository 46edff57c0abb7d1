"""The release controller as the lab runs it: its own process, `python -m ...`, for the tests
and benches that measure it from outside."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from tests.support.waits import settles

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port: int, path: str) -> int:
    """The status of GET http://127.0.0.1:<port><path>; 0 when nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:
        return 0


@contextmanager
def controller_process(kubeconfig: str, *args: str, log_level: str = "ERROR") -> Iterator[tuple[psutil.Process, int]]:
    """(process, metrics port) of a controller on `kubeconfig`, ready (its first list done).
    The kubeconfig goes to a 0600 file removed as soon as the process has read it."""
    fd, path = tempfile.mkstemp(suffix=".kubeconfig")
    with os.fdopen(fd, "w") as f:
        f.write(kubeconfig)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.controllers.release", "--kubeconfig", path,
         "--listen", f"127.0.0.1:{port}", "--log-level", log_level, *args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the release controller did not get ready (exit {proc.poll()})")
            return http_status(port, "/readyz") == 200

        if not settles(ready, timeout=60, interval=0.2):
            raise RuntimeError(f"the release controller did not get ready (exit {proc.poll()})")
        os.unlink(path)
        yield psutil.Process(proc.pid), port
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if os.path.exists(path):
            os.unlink(path)
