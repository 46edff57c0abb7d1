"""What the lab itself costs: the dev stack run whole on this host, as the README runs it
(tests/support/dev_lab.py: the lab's images through a local registry as the mirror, real
Kamaji, cert-manager, HAMi's scheduler and its mock device plugin).

Prints: cold `up` (from nothing), a second `up` (no changes), `destroy`, each in seconds; over
the cold `up` and the second, sampled every 2 s: the peak host memory in use, the peak summed
memory of the lab's containers and the Docker engine (dockerd, containerd), the peak summed CPU
of the lab's containers (100 % = one core), and the most containers at once; the cores this
host has, and whether the lab's peak fits the reference lab's 8 GB.

Needs what the lab tier needs (its docstring): the provider plugins, the images and the charts.
Usage: GPU_TENANCY_PROVIDER_PLUGINS=DIR GPU_TENANCY_LAB_CHARTS=DIR .venv/bin/python bench/dev_lab.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.dev_lab import Sampler, dev_lab  # noqa: E402

REFERENCE_MIB = 8 * 1024


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dev-lab-bench-") as scratch, dev_lab(Path(scratch)) as lab:
        sampler = Sampler(f"{lab.name}-")
        cold = lab.up(label="cold up")
        if cold.returncode != 0:
            sys.exit(f"cold up failed:\n{(cold.stdout + cold.stderr)[-4000:]}")
        second = lab.up("--expect-no-changes", label="second up")
        peaks = sampler.stop()
        if second.returncode != 0:
            sys.exit(f"second up changed something or failed:\n{(second.stdout + second.stderr)[-4000:]}")
        start = time.monotonic()
        destroyed = lab.pulumi("destroy", "--yes", timeout=1800)
        destroy_seconds = time.monotonic() - start
        if destroyed.returncode != 0:
            sys.exit(f"destroy failed:\n{(destroyed.stdout + destroyed.stderr)[-4000:]}")
        left = lab.leftovers()
        print(f"cold up             {lab.seconds['cold up']:7.0f} s")
        print(f"second up           {lab.seconds['second up']:7.0f} s  (no changes)")
        print(f"destroy             {destroy_seconds:7.0f} s  (left behind: {', '.join(left) or 'nothing'})")
        print(f"host memory in use  {peaks.host_used_mib:7.0f} MiB peak  ({peaks.samples} samples)")
        print(f"lab + engine memory {peaks.lab_mib:7.0f} MiB peak  (containers' usage + dockerd/containerd RSS)")
        print(f"lab CPU             {peaks.cpu_percent:7.0f} % peak  (100 % = one core; this host: {os.cpu_count()})")
        print(f"containers          {peaks.containers:7d} at most")
        fits = peaks.lab_mib <= REFERENCE_MIB
        print(
            f"fits in 8 GB        {'yes' if fits else 'no':>7}  "
            f"({peaks.lab_mib / REFERENCE_MIB:.0%} of the reference lab's 8 GB)"
        )


if __name__ == "__main__":
    import pytest

    try:
        main()
    except pytest.skip.Exception as missing:  # a part the lab needs is not here: named, not a traceback
        sys.exit(f"cannot run: {missing}")
