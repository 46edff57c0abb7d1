"""KWOK (built by tools/build.sh at the version the lab's image pins) beside a test API server,
acting as the lab's KwokController does: a ServiceAccount limited to KWOK_RBAC_RULES, the flags
of kwok_args. Its pods and nodes are the project's; only the process is started here."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from components.controllers.kwok import KWOK_RBAC_RULES, NODE_STAGES, kwok_args
from components.kube.client import cluster_ca, token_kubeconfig
from components.kube.waiting import TimedOut, wait_until
from tests.support.cluster import TestCluster, free_port

ACCOUNT = "gpu-tenancy-kwok"


def kwok_kubeconfig(cluster: TestCluster) -> str:
    """A kubeconfig for a ServiceAccount bound to exactly KWOK_RBAC_RULES."""
    from kubernetes import client

    core = cluster.core()
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    core.create_namespaced_service_account("kube-system", {"metadata": {"name": ACCOUNT}})
    rbac.create_cluster_role({"metadata": {"name": ACCOUNT}, "rules": [dict(r) for r in KWOK_RBAC_RULES]})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "kube-system"}],
        }
    )
    token = core.create_namespaced_service_account_token(
        ACCOUNT, "kube-system", {"spec": {"expirationSeconds": 86400}}
    ).status.token
    server = f"https://127.0.0.1:{cluster.port}"
    return token_kubeconfig(server, cluster_ca(cluster.kubeconfig_text), token)


def start_kwok(cluster: TestCluster, pod_cidr: str = "10.244.0.0/16") -> tuple[subprocess.Popen, int]:
    """KWOK on its least-privilege token; stopped with the cluster. Returns (process, health port)."""
    path = cluster.workdir / "kwok.kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(kwok_kubeconfig(cluster))
    stages = cluster.workdir / "kwok-stages.yaml"
    stages.write_text(NODE_STAGES)
    port = free_port()
    args = [a for a in kwok_args(str(path), pod_cidr, str(stages)) if not a.startswith("--server-address")]
    log = open(cluster.workdir / "kwok.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [cluster._bin("kwok"), *args, f"--server-address=127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cluster.env,
    )
    cluster.procs.append(proc)
    return proc, port


def wait_for(check: Any, timeout: float, what: str, interval: float = 0.5) -> Any:
    try:
        return wait_until(check, timeout=timeout, interval=interval, what=what)
    except TimedOut:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}") from None
