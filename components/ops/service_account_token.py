"""Reading a ServiceAccount's long-lived token once the token controller has filled it in.

A Secret of type kubernetes.io/service-account-token is created empty; kube-controller-manager
writes `data.token` into it shortly after. The lab gives its release controllers such a token
(not an admin kubeconfig), so this waits for it, with a deadline.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from components.ops.kube import get_json_or_none


class TokenNotIssuedError(Exception):
    """The token controller did not fill the Secret in time."""


def read_token(core: Any, namespace: str, name: str) -> str | None:
    secret = get_json_or_none(core.read_namespaced_secret, name, namespace)
    if secret is None:
        return None
    token = (secret.get("data") or {}).get("token")
    return base64.b64decode(token).decode() if token else None


def wait_for_token(core: Any, namespace: str, name: str, timeout: float, interval: float = 1.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        token = read_token(core, namespace, name)
        if token:
            return token
        if time.monotonic() >= deadline:
            raise TokenNotIssuedError(
                f"Secret {namespace}/{name} has no token after {timeout:g} s: the tenant's "
                "kube-controller-manager (its token controller) fills it; check the TenantControlPlane's pod"
            )
        time.sleep(interval)
