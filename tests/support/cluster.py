"""A real kube-apiserver on loopback, backed by a real etcd, for the integration tier.

Certificates are made with openssl; the admin authenticates with a static token in
system:masters. Only the API server runs (no controller-manager, no kubelet): nodes are API
objects, which is all HAMi's scheduler and this project's components look at.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.waits import settles

TOKEN = "gpu-tenancy-integration-admin"


def routable_ip() -> str:
    """A local IPv4 address that is not loopback: the API server refuses to proxy to, and
    Endpoints refuse to name, loopback addresses. Adds 10.255.255.1/32 to lo when the machine
    has none (root)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        return line.split()[3].split("/")[0]
    fallback = "10.255.255.1"
    subprocess.run(["ip", "addr", "add", f"{fallback}/32", "dev", "lo"], capture_output=True)
    return fallback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def self_signed(workdir: Path, name: str, subject: str, san: str | None = None) -> tuple[Path, Path]:
    """A self-signed certificate and key (openssl), valid two days; returns (crt, key)."""
    extra = ["-addext", f"subjectAltName={san}"] if san else []
    # fmt: off
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject, *extra,
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=workdir)
    # fmt: on
    return workdir / f"{name}.crt", workdir / f"{name}.key"


def signed_by(workdir: Path, ca: str, name: str, subject: str, extensions: str) -> tuple[Path, Path]:
    """A key and a certificate signed by the CA `<ca>.crt`/`<ca>.key` in `workdir`, with these
    X.509 extensions (one per line, e.g. `subjectAltName=IP:127.0.0.1`), valid two days."""
    (workdir / f"{name}.cnf").write_text(extensions + "\n")
    # fmt: off
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
             "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=workdir)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", f"{name}.cnf", "-out", f"{name}.crt", cwd=workdir)
    # fmt: on
    return workdir / f"{name}.crt", workdir / f"{name}.key"


@dataclass
class TestCluster:
    workdir: Path
    env: dict[str, str]
    # Extra kube-apiserver flags (e.g. --watch-cache=false, so watches read etcd directly).
    api_args: list[str] = field(default_factory=list)
    # Where the API server listens and what its certificate names: loopback, or a lab network's
    # gateway address for node containers to join (never an address outside the machine).
    address: str = "127.0.0.1"
    port: int = 0
    etcd_port: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)
    kubeconfig_text: str = ""
    _api_cmd: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        """host:port of the API server, as a joining node names it."""
        return f"{self.address}:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.workdir / "kubeconfig"

    def start(self) -> TestCluster:
        """Start etcd and kube-apiserver; what was started is stopped again if either fails."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> TestCluster:
        w = self.workdir
        self_signed(w, "ca", "/CN=gpu-tenancy-test-ca")
        signed_by(
            w, "ca", "server", "/CN=kube-apiserver", f"subjectAltName=IP:127.0.0.1,IP:{self.address},DNS:localhost"
        )
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=w)
        (w / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')

        etcd_client, etcd_peer = free_port(), free_port()
        self.etcd_port = etcd_client
        etcd_log = open(w / "etcd.log", "w")  # noqa: SIM115 - closed with the process
        self.procs.append(
            subprocess.Popen(
                [
                    self._bin("etcd"),
                    "--data-dir",
                    str(w / "etcd"),
                    "--name",
                    "test",
                    "--listen-client-urls",
                    f"http://127.0.0.1:{etcd_client}",
                    "--advertise-client-urls",
                    f"http://127.0.0.1:{etcd_client}",
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{etcd_peer}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{etcd_peer}",
                    "--initial-cluster",
                    f"test=http://127.0.0.1:{etcd_peer}",
                    "--log-level",
                    "warn",
                ],
                stdout=etcd_log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        )
        self.port = free_port()
        self._api_cmd = [
            self._bin("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={self.port}",
            f"--tls-cert-file={w / 'server.crt'}",
            f"--tls-private-key-file={w / 'server.key'}",
            f"--client-ca-file={w / 'ca.crt'}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={w / 'sa.key'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            # No controller-manager runs: nothing would create the ServiceAccount tokens.
            "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false",
            f"--cert-dir={w / 'certs'}",
        ]
        # A flag in api_args replaces the default of that name (list flags would add up otherwise).
        given = {a.split("=", 1)[0] for a in self.api_args}
        self._api_cmd = [a for a in self._api_cmd if a.split("=", 1)[0] not in given] + list(self.api_args)
        self._start_apiserver_on_a_free_port()
        ca = base64.b64encode((w / "ca.crt").read_bytes()).decode()
        self.kubeconfig_text = yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {"server": f"https://{self.address}:{self.port}", "certificate-authority-data": ca},
                    }
                ],
                "users": [{"name": "admin", "user": {"token": TOKEN}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
                "current-context": "test",
            }
        )
        self.kubeconfig_path.write_text(self.kubeconfig_text)
        self._wait_ready()
        return self

    def _start_apiserver_on_a_free_port(self, attempts: int = 3) -> None:
        """free_port() can race with another process taking the port before the API server binds
        it: pick another when the API server says so."""
        for _ in range(attempts):
            self._start_apiserver()
            api = self.procs[-1]
            settles(lambda api=api: api.poll() is not None, timeout=5, interval=0.2)
            log = (self.workdir / "kube-apiserver.log").read_text()
            if api.poll() is None or "address already in use" not in log.splitlines()[-1]:
                return
            self.procs.remove(api)
            self.port = free_port()
            self._api_cmd = [
                f"--secure-port={self.port}" if a.startswith("--secure-port=") else a for a in self._api_cmd
            ]

    def _start_apiserver(self) -> None:
        api_log = open(self.workdir / "kube-apiserver.log", "a")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(self._api_cmd, stdout=api_log, stderr=subprocess.STDOUT, env=self.env))

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver (etcd keeps the data), wait, start it again on the same port."""
        (api,) = [p for p in self.procs if p.args[0] == self._api_cmd[0] and p.poll() is None]
        api.terminate()
        try:
            api.wait(timeout=10)
        except subprocess.TimeoutExpired:  # open watches keep a graceful shutdown waiting
            api.kill()
            api.wait(timeout=10)
        self.procs.remove(api)
        time.sleep(down_seconds)
        self._start_apiserver()
        self._wait_ready()

    def etcd_compact(self) -> int:
        """Compact etcd to its current revision (its JSON gateway); returns that revision.

        A watch resumed from an older resourceVersion then gets 410 Gone from etcd (with the
        watch cache off; the cache otherwise answers from its own window)."""
        import json
        import urllib.request

        base = f"http://127.0.0.1:{self.etcd_port}/v3/kv"
        req = urllib.request.Request(f"{base}/range", data=json.dumps({"key": "AA=="}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            revision = int(json.loads(resp.read())["header"]["revision"])
        body = json.dumps({"revision": str(revision), "physical": True}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{base}/compaction", data=body, method="POST"), timeout=30):
            pass
        return revision

    def _bin(self, name: str) -> str:
        found = shutil.which(name, path=self.env["PATH"])
        if found is None:
            raise FileNotFoundError(name)
        return found

    def _wait_ready(self, timeout: float = 120) -> None:
        last = {"error": ""}

        def ready() -> bool:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; see {self.workdir}")
            try:
                # The default namespace is made by the API server's own bootstrap controller.
                return bool(self.core().read_namespace("default"))
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last["error"] = str(exc)
                return False

        if not settles(ready, timeout=timeout):
            raise TimeoutError(f"kube-apiserver not ready after {timeout} s: {last['error']}")

    def start_scheduler(self) -> subprocess.Popen:
        """kube-scheduler (default profile) against this API server; stopped with the cluster."""
        log = open(self.workdir / "kube-scheduler.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [
                self._bin("kube-scheduler"),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--authentication-kubeconfig={self.kubeconfig_path}",
                f"--authorization-kubeconfig={self.kubeconfig_path}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self.procs.append(proc)
        return proc

    def start_controller_manager(self, controllers: list[str], extra_args: list[str] | None = None) -> subprocess.Popen:
        """kube-controller-manager with just these controllers (e.g. tokencleaner, resourcequota,
        serviceaccount-token) and any extra flags; stopped with the cluster."""
        w = self.workdir
        log = open(w / "kube-controller-manager.log", "a")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [
                self._bin("kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--authentication-kubeconfig={self.kubeconfig_path}",
                f"--authorization-kubeconfig={self.kubeconfig_path}",
                f"--controllers={','.join(controllers)}",
                f"--service-account-private-key-file={w / 'sa.key'}",
                f"--root-ca-file={w / 'ca.crt'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--concurrent-resource-quota-syncs=2",
                "--resource-quota-sync-period=5s",
                *(extra_args or []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self.procs.append(proc)
        return proc

    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config_dict(yaml.safe_load(self.kubeconfig_text))

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client())

    def stop(self) -> None:
        stop_processes(list(reversed(self.procs)))


def stop_processes(procs: list[subprocess.Popen], timeout: float = 20) -> None:
    """Terminate, wait, kill what does not stop."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def start_cluster(env: dict[str, str], api_args: list[str] | None = None, address: str = "127.0.0.1") -> TestCluster:
    workdir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-cluster-"))
    return TestCluster(workdir=workdir, env=env, api_args=list(api_args or []), address=address).start()


def add_node(cluster: TestCluster, name: str, mock_gpu: bool = True) -> None:
    """A Node as a kubelet would register it (minus the kubelet): Ready, with cpu/memory/pods;
    labelled as a mock-GPU node (what the inventory does) unless `mock_gpu` is False."""
    from kubernetes import client

    from components.domain.names import MOCK_GPU_NODE_LABEL

    core = cluster.core()
    labels = {"kubernetes.io/hostname": name}
    if mock_gpu:
        labels[MOCK_GPU_NODE_LABEL[0]] = MOCK_GPU_NODE_LABEL[1]
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    # The API server taints new nodes not-ready; no node-lifecycle controller runs to lift it.
    core.patch_node(name, {"spec": {"taints": None}})
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core.patch_node_status(
        name,
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test node",
                        "lastHeartbeatTime": None,
                        "lastTransitionTime": None,
                    }
                ],
            }
        },
    )
