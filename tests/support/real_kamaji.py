"""Kamaji's real manager, out of cluster, against a test kube-apiserver: the TenantControlPlane
and DataStore CRDs (the fixtures, Kamaji 26.8.2-edge), a DataStore on a TLS etcd of its own
(client-certificate auth, as Kamaji's etcd driver requires), the manager (`kamaji manager`,
flags as in reference 11c) with its webhook server on 9443 (a fixed port in Kamaji's code)
and its serving certificate in controller-runtime's default folder under TMPDIR, and Kamaji's
mutating and validating webhooks (the chart's rules) registered by URL with that CA.

Given a Kamaji binary (the root package of clastix/kamaji, path in KAMAJI_BIN; CI cannot obtain
Kamaji, whose module these machines are not served). What cannot run out of cluster: Kamaji
reaches each tenant API through in-cluster DNS to install its addons, so no TCP becomes Ready.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from components.kube.waiting import TimedOut, wait_until
from tests.support.cluster import TestCluster, free_port, self_signed, signed_by
from tests.support.kamaji_crd import crd
from tests.support.tools import executable_from_env

ENV = "KAMAJI_BIN"
SKIP_REASON = (
    f"real-Kamaji tier: set {ENV} to a Kamaji manager binary (the root package of clastix/kamaji at the "
    "pinned tag 26.8.2-edge, run as `kamaji manager`); CI cannot obtain Kamaji: its Go module is not "
    "served to these machines"
)
CRDS = ("kamaji.clastix.io_datastores.yaml", "kamaji.clastix.io_tenantcontrolplanes.yaml")
NAMESPACE = "kamaji-system"
DATASTORE = "default"
WEBHOOK_PORT = 9443  # fixed in Kamaji's manager
GROUP, VERSION = "kamaji.clastix.io", "v1alpha1"
# The chart's webhooks (charts/kamaji/controller-gen/*-webhook.yaml), telemetry left out.
MUTATE = ("mtenantcontrolplane.kb.io", "/mutate-kamaji-clastix-io-v1alpha1-tenantcontrolplane")
VALIDATE = ("vtenantcontrolplane.kb.io", "/validate-kamaji-clastix-io-v1alpha1-tenantcontrolplane")


def binary() -> str | None:
    return executable_from_env(ENV)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@dataclass
class TlsEtcd:
    """An etcd serving TLS and accepting only client certificates of its CA (Kamaji's driver
    needs the CA's key too: it issues the tenants' datastore certificates from it). The server
    certificate serves for clients too: etcd's JSON gateway dials etcd with it."""

    cluster: TestCluster
    port: int = 0
    dir: Path = field(default_factory=Path)

    def start(self) -> TlsEtcd:
        w = self.dir = self.cluster.workdir / "datastore"
        w.mkdir()
        self_signed(w, "ca", "/CN=gpu-tenancy-datastore-ca")
        signed_by(w, "ca", "server", "/CN=etcd", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth")
        signed_by(w, "ca", "client", "/CN=root", "extendedKeyUsage=clientAuth")
        self.port, peer = free_port(), free_port()
        log = open(w / "etcd.log", "w")  # noqa: SIM115 - closed with the process
        # fmt: off
        proc = subprocess.Popen(
            [self.cluster._bin("etcd"), "--data-dir", str(w / "data"), "--name", "datastore",
             "--listen-client-urls", f"https://127.0.0.1:{self.port}",
             "--advertise-client-urls", f"https://127.0.0.1:{self.port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"datastore=http://127.0.0.1:{peer}",
             "--cert-file", str(w / "server.crt"), "--key-file", str(w / "server.key"),
             "--client-cert-auth", "--trusted-ca-file", str(w / "ca.crt"), "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, env=self.cluster.env,
        )
        # fmt: on
        self.cluster.procs.append(proc)
        wait_until(lambda: self.post("/v3/maintenance/status", {}) is not None, timeout=30, what="the datastore")
        return self

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """etcd's JSON gateway, as root (its client certificate); None while it is not up."""
        ctx = ssl.create_default_context(cafile=str(self.dir / "ca.crt"))
        ctx.load_cert_chain(str(self.dir / "client.crt"), str(self.dir / "client.key"))
        req = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as answer:
                return json.loads(answer.read())
        except OSError:
            return None

    def users(self) -> list[str]:
        return (self.post("/v3/auth/user/list", {}) or {}).get("users", [])

    def roles(self) -> list[str]:
        return (self.post("/v3/auth/role/list", {}) or {}).get("roles", [])

    def keys_under(self, prefix: str) -> int:
        key = base64.b64encode(prefix.encode()).decode()
        end = base64.b64encode((prefix[:-1] + chr(ord(prefix[-1]) + 1)).encode()).decode()
        answer = self.post("/v3/kv/range", {"key": key, "range_end": end, "count_only": True}) or {}
        return int(answer.get("count", 0))

    def datastore(self, name: str = DATASTORE) -> dict[str, Any]:
        w = self.dir
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DataStore",
            "metadata": {"name": name},
            "spec": {
                "driver": "etcd",
                "endpoints": [f"127.0.0.1:{self.port}"],
                "tlsConfig": {
                    "certificateAuthority": {
                        "certificate": {"content": _b64(w / "ca.crt")},
                        "privateKey": {"content": _b64(w / "ca.key")},
                    },
                    "clientCertificate": {
                        "certificate": {"content": _b64(w / "client.crt")},
                        "privateKey": {"content": _b64(w / "client.key")},
                    },
                },
            },
        }


@dataclass
class RealKamaji:
    cluster: TestCluster
    path: str
    etcd: TlsEtcd | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)
    log: Path = field(default_factory=Path)

    def start(self) -> RealKamaji:
        api = self.cluster.api_client()
        ext = client.ApiextensionsV1Api(api)
        for name in CRDS:
            ext.create_custom_resource_definition(crd(name))
        self.cluster.core().create_namespace({"metadata": {"name": NAMESPACE}})
        self.etcd = TlsEtcd(self.cluster).start()
        custom = client.CustomObjectsApi(api)
        wait_until(
            lambda: _created(custom.create_cluster_custom_object, GROUP, VERSION, "datastores", self.etcd.datastore()),
            timeout=30,
            what="the DataStore CRD to serve",
        )
        w = self.cluster.workdir / "kamaji"
        certs = w / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True)
        crt, _key = self_signed(certs, "tls", "/CN=127.0.0.1", san="IP:127.0.0.1")
        (certs / "ca.crt").write_bytes(crt.read_bytes())
        probe = free_port()
        self.log = w / "kamaji.log"
        # fmt: off
        cmd = [self.path, "manager", "--leader-elect=false", f"--metrics-bind-address=127.0.0.1:{free_port()}",
               f"--health-probe-bind-address=127.0.0.1:{probe}", f"--datastore={DATASTORE}", "--disable-telemetry",
               f"--tmp-directory={w / 'tmp'}", f"--pod-namespace={NAMESPACE}", "--serviceaccount-name=kamaji",
               "--webhook-service-name=kamaji-webhook-service", f"--webhook-ca-path={certs / 'ca.crt'}"]
        # fmt: on
        env = {**self.cluster.env, "KUBECONFIG": str(self.cluster.kubeconfig_path), "TMPDIR": str(w)}
        proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env)  # noqa: SIM115
        self.procs.append(proc)
        self.cluster.procs.append(proc)
        self._webhooks(_b64(crt))

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"kamaji exited with {proc.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{probe}/readyz", timeout=2) as answer:
                    return answer.status == 200
            except OSError:
                return False

        try:
            wait_until(ready, timeout=60, interval=0.5, what="Kamaji's manager")
        except TimedOut:
            raise RuntimeError(f"Kamaji's manager not ready within 60 s; see {self.log}") from None
        return self

    def _webhooks(self, ca: str) -> None:
        adm = client.AdmissionregistrationV1Api(self.cluster.api_client())
        rules = [
            {
                "apiGroups": [GROUP],
                "apiVersions": [VERSION],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["tenantcontrolplanes"],
            }
        ]

        def hook(name: str, path: str) -> dict[str, Any]:
            url = f"https://127.0.0.1:{WEBHOOK_PORT}{path}"
            return {
                "name": name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "rules": rules,
            }

        adm.create_mutating_webhook_configuration(
            {"metadata": {"name": "kamaji-mutating-webhook-configuration"}, "webhooks": [hook(*MUTATE)]}
        )
        adm.create_validating_webhook_configuration(
            {"metadata": {"name": "kamaji-validating-webhook-configuration"}, "webhooks": [hook(*VALIDATE)]}
        )


def _created(create: Any, *args: Any) -> bool:
    try:
        create(*args)
        return True
    except client.ApiException as exc:
        if exc.status == 409:
            return True
        if exc.status == 404:  # the CRD is not served yet
            return False
        raise
