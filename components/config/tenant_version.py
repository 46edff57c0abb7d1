"""Kamaji's rules for a tenant's Kubernetes version, so the stack refuses at preview what
Kamaji's webhook would refuse at apply, in Kamaji's words (internal/webhook/handlers/
tcp_version.go at the pinned tag; the real-Kamaji tier holds the two side by side).

Patch releases are ignored: a version is compared by major.minor only. A new tenant may not be
above the minor of the kubeadm Kamaji embeds; an existing one moves at most one minor up per
`up`, never down (within a minor any patch goes, either way). The control plane moves first:
workers and HAMi's kube-scheduler follow the tenant's version.
"""

from __future__ import annotations

import re

from components.config import versions

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?")


def parse(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version like v1.35.1; None when it is not one."""
    found = _VERSION.fullmatch(version.strip()) if isinstance(version, str) else None
    return (int(found[1]), int(found[2])) if found else None


def _supported() -> tuple[int, int]:
    found = parse(versions.KAMAJI_KUBEADM_VERSION)
    assert found is not None
    return found


def create_refusal(version: str) -> str | None:
    """Why Kamaji would refuse a new TenantControlPlane at `version`, or None."""
    new = parse(version)
    if new is None:
        return f"unable to parse the desired Kubernetes version {version!r}"
    top = _supported()
    if new > top:
        return (
            "unable to create a TenantControlPlane with a Kubernetes version greater than the supported one, "
            f"actually v{top[0]}.{top[1]}"
        )
    return None


def step_refusal(old: str, new: str) -> str | None:
    """Why Kamaji would refuse moving a TenantControlPlane from `old` to `new`, or None."""
    was, now = parse(old), parse(new)
    if was is None:
        return f"unable to parse the previous Kubernetes version {old!r}"
    if now is None:
        return f"unable to parse the desired Kubernetes version {new!r}"
    top = _supported()
    if now > top:
        return f"unable to upgrade to a version greater than the supported one (v{top[0]}.{top[1]})"
    if now < was:
        return f"unable to downgrade a TenantControlPlane from {was[0]}.{was[1]}.0 to {now[0]}.{now[1]}.0"
    if now[1] - was[1] > 1:
        return "unable to upgrade to a minor version in a non-sequential mode"
    return None
