"""Kubeconfig text helpers (pure): point a kubeconfig at an address the caller can reach."""

from __future__ import annotations

import yaml


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


def server_of(kubeconfig: str) -> str:
    """The server URL of the kubeconfig's current context (or its only cluster)."""
    doc = yaml.safe_load(kubeconfig)
    clusters = {c["name"]: c["cluster"] for c in doc.get("clusters", [])}
    current = doc.get("current-context")
    for ctx in doc.get("contexts", []):
        if ctx.get("name") == current:
            return clusters[ctx["context"]["cluster"]]["server"]
    if len(clusters) == 1:
        return next(iter(clusters.values()))["server"]
    raise ValueError("kubeconfig has no current context")
