"""What one team's own etcd costs, and what its quota bounds: etcd as a platform runs it per team
(kamaji-etcd's flags: TLS with client certificates, periodic compaction, the team's
--quota-backend-bytes), here the tools cache's etcd (tools/build.sh) on this machine.

Printed: the time from start to a healthy member; resident memory and disk idle, then after writing
MB of control-plane-sized objects (8 KiB values under distinct keys, as a tenant's API server writes
them), with memory per MB of data; then two etcds side by side as two teams' would be, one with a
small quota written past it: the MB it took before its space alarm refused writes, that it still
answers reads, and that the other team's etcd still takes writes.

Usage: .venv/bin/python bench/team_etcd.py [MB to write, default 256] [small quota MB, default 64]
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.platform.team_datastore import etcd_memory_limit_mi  # noqa: E402
from tests.support.cluster import free_port, self_signed, signed_by  # noqa: E402
from tests.support.tools import require, tools_env  # noqa: E402

VALUE = 8 * 1024
MB = 1024 * 1024


class Etcd:
    """One member, started with the chart's flags and TLS."""

    def __init__(self, env: dict[str, str], work: Path, name: str, quota_mb: int):
        self.work, self.name = work, name
        certs = work / "pki"
        certs.mkdir(parents=True, exist_ok=True)
        if not (certs / "ca.crt").exists():
            self_signed(certs, "ca", "/CN=etcd-ca")
            # client auth too, as the chart's server certificates have it: etcd's own gateway dials
            # its gRPC port with this certificate
            server_usage = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"
            signed_by(certs, "ca", "server", "/CN=etcd", server_usage)
            signed_by(certs, "ca", "root", "/CN=root/O=system:masters", "extendedKeyUsage=clientAuth")
        self.client, peer, self.metrics = free_port(), free_port(), free_port()
        self.data = work / name
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [
                shutil.which("etcd", path=env["PATH"]) or "etcd",
                f"--data-dir={self.data}",
                f"--name={name}",
                "--initial-cluster-state=new",
                f"--initial-cluster={name}=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--advertise-client-urls=https://127.0.0.1:{self.client}",
                f"--listen-client-urls=https://127.0.0.1:{self.client}",
                f"--listen-metrics-urls=http://127.0.0.1:{self.metrics}",
                "--client-cert-auth=true",
                f"--trusted-ca-file={certs / 'ca.crt'}",
                f"--cert-file={certs / 'server.crt'}",
                f"--key-file={certs / 'server.key'}",
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=5m",
                "--snapshot-count=10000",
                f"--quota-backend-bytes={quota_mb * MB}",
                "--log-level=error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.http = requests.Session()
        self.http.cert = (str(certs / "root.crt"), str(certs / "root.key"))
        self.ca = str(certs / "ca.crt")
        while True:  # the chart's liveness probe: /livez on the metrics port
            try:
                if requests.get(f"http://127.0.0.1:{self.metrics}/livez", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if self.proc.poll() is not None or time.monotonic() - started > 60:
                raise RuntimeError(f"etcd {name} did not become healthy")
            time.sleep(0.05)
        self.start_seconds = time.monotonic() - started

    def call(self, path: str, body: dict) -> dict:
        # verify given per request: a session's would yield to REQUESTS_CA_BUNDLE from the environment
        url = f"https://127.0.0.1:{self.client}/v3/{path}"
        return self.http.post(url, json=body, timeout=30, verify=self.ca).json()

    def put(self, key: str, value: bytes) -> str:
        """'' when stored, else etcd's error."""
        answer = self.call(
            "kv/put", {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value).decode()}
        )
        return answer.get("error") or answer.get("message") or ""

    def get(self, key: str) -> bool:
        answer = self.call("kv/range", {"key": base64.b64encode(key.encode()).decode()})
        return bool(answer.get("kvs"))

    def db_mb(self) -> float:
        return int(self.call("maintenance/status", {}).get("dbSize", 0)) / MB

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / MB

    def disk_mb(self) -> float:
        return sum(f.stat().st_size for f in self.data.rglob("*") if f.is_file()) / MB

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def fill(etcd: Etcd, mb: float, prefix: str) -> tuple[int, str]:
    """Write `mb` MB of 8 KiB values; (values stored, the error that stopped it or '')."""
    value = b"x" * VALUE
    for i in range(int(mb * MB // VALUE)):
        said = etcd.put(f"/{prefix}/registry/configmaps/ns/obj-{i:07d}", value)
        if said and i == 0:
            raise RuntimeError(f"etcd {etcd.name} refused the first write: {said}")
        if said:
            return i, said
    return int(mb * MB // VALUE), ""


def main() -> None:
    write_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 256
    small_quota = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    env = tools_env()
    require(env, "etcd", "openssl", skip=lambda why: sys.exit(f"bench/team_etcd.py: {why}"))
    version = subprocess.run(["etcd", "--version"], capture_output=True, text=True, env=env).stdout.split()[2]
    work = Path(tempfile.mkdtemp(prefix="team-etcd-"))
    try:
        print(f"etcd {version}, one member with TLS and kamaji-etcd's flags, 8 KiB values")
        a = Etcd(env, work, "team-a", 2048)
        time.sleep(5)
        idle_rss, idle_disk = a.rss_mb(), a.disk_mb()
        started = time.monotonic()
        stored, said = fill(a, write_mb, "team-a")
        seconds = time.monotonic() - started
        time.sleep(2)
        rss, disk, db = a.rss_mb(), a.disk_mb(), a.db_mb()
        print(f"start to healthy: {a.start_seconds:.2f} s")
        print(f"idle: resident {idle_rss:.0f} MiB, disk {idle_disk:.1f} MiB")
        print(
            f"after {stored * VALUE / MB:.0f} MiB written ({stored} values, {stored / seconds:.0f}/s): database "
            f"{db:.0f} MiB, resident {rss:.0f} MiB ({(rss - idle_rss) / max(db, 1):.2f} MiB per MiB of database), "
            f"disk {disk:.0f} MiB ({disk / max(db, 1):.2f}x the database)"
        )
        print(f"memory limit the platform gives a 2048 MB quota: {etcd_memory_limit_mi(2048)} MiB")
        b = Etcd(env, work, "team-b", small_quota)
        stored_b, said_b = fill(b, small_quota * 4, "team-b")
        alarmed_at = stored_b * VALUE / MB
        print(
            f"team-b at quota {small_quota} MB: writes refused after {alarmed_at:.0f} MiB "
            f"({alarmed_at / small_quota:.2f}x the quota): {said_b or 'never refused'}"
        )
        print(f"  team-b still reads: {b.get('/team-b/registry/configmaps/ns/obj-0000000')}")
        print(f"  team-a still writes: {a.put('/team-a/after-b-alarmed', b'ok') == ''}")
        figures = {"start_s": round(a.start_seconds, 2), "idle_rss_mib": round(idle_rss), "rss_mib": round(rss)}
        figures |= {"db_mib": round(db), "disk_mib": round(disk), "alarm_at_mib": round(alarmed_at)}
        print(json.dumps(figures))
        a.stop()
        b.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
