"""Kubeconfig text helpers: point a kubeconfig at an address the caller can reach, and open a
Kubernetes client from a kubeconfig's text (what the dynamic providers receive as a secret)."""

from __future__ import annotations

from typing import Any

import yaml


def core_api(kubeconfig: str) -> Any:
    """A CoreV1Api for a kubeconfig's text; made per call, never kept on a pickled provider."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config_dict(yaml.safe_load(kubeconfig)))


def rewrite_server(kubeconfig: str, server: str) -> str:
    """Return the kubeconfig with every cluster's server replaced by `server`.

    k3s writes https://127.0.0.1:6443, which only works inside its container; the host and the
    worker containers reach it on its Docker network address (which k3s puts in its cert SANs).
    """
    doc = yaml.safe_load(kubeconfig)
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list) or not doc["clusters"]:
        raise ValueError("kubeconfig has no clusters")
    for entry in doc["clusters"]:
        entry["cluster"]["server"] = server
    return yaml.safe_dump(doc, sort_keys=False)


def http_status(exc: Exception) -> int | None:
    """The HTTP status of a kubernetes client error (None for any other exception)."""
    return getattr(exc, "status", None)
