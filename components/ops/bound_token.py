"""Bound ServiceAccount tokens (TokenRequest), and a keeper that renews one before it expires.

Why bound tokens: a legacy token Secret never expires and is never rotated. A bound token carries
an expiry, is tied to its ServiceAccount (deleting the account revokes every token it was given)
and names the account in audit logs. Each identity renews only itself (`create` on its own
`serviceaccounts/token`, see `self_renewal_rules`), so no controller can mint another's token.

The keeper is what the lab's controllers run with: it starts from the token the stack issued,
keeps the newest valid token in a file, and renews it once RENEW_AT of its life has passed (kubelet
renews projected tokens at 80 %). A client reads the file (client-go's `tokenFile` re-reads it every
minute; the release controller reads it before each request), so nothing restarts on renewal.

CLI (the KWOK container's keeper): `python -m components.ops.bound_token --kubeconfig K --token-file F`.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from components.ops.kube import cluster_ca, cluster_server, core_api, token_kubeconfig

log = logging.getLogger("gpu-tenancy.bound-token")

# Renew once this share of a token's life has passed.
RENEW_AT = 2 / 3
# The API server's floor for expirationSeconds.
MIN_SECONDS = 600
# What the lab's controllers ask for: renewed about every 16 h.
CONTROLLER_SECONDS = 24 * 3600
SA_PREFIX = "system:serviceaccount:"


class TokenExpiredError(Exception):
    """No token the keeper holds is still valid: the stack must issue a new one (`pulumi up`)."""


def seconds_left(expiry: str | None, now: float) -> float:
    """Seconds from `now` until an RFC 3339 `expiry` (an API object's); 0 when none is known."""
    if not expiry:
        return 0.0
    return datetime.fromisoformat(expiry).timestamp() - now


def self_renewal_rules(account: str) -> list[dict[str, Any]]:
    """What a ServiceAccount needs to renew its own token, and nothing of any other account."""
    return [
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": [account], "verbs": ["create"]}
    ]


def claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified: only to read its expiry and subject (the API server verifies)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    return json.loads(base64.urlsafe_b64decode(payload))


def expires(token: str) -> float:
    return float(claims(token)["exp"])


def account_of(token: str) -> tuple[str, str]:
    """(namespace, name) of the ServiceAccount a bound token was issued to."""
    sub = str(claims(token).get("sub", ""))
    if not sub.startswith(SA_PREFIX) or sub.count(":") != 3:
        raise ValueError(f"token subject {sub!r} is not a ServiceAccount")
    namespace, name = sub[len(SA_PREFIX) :].split(":")
    return namespace, name


def renew_due(token: str, now: float) -> bool:
    c = claims(token)
    issued, exp = float(c.get("iat", c.get("nbf", 0))), float(c["exp"])
    return now >= issued + RENEW_AT * (exp - issued)


def request_token(core: Any, namespace: str, account: str, seconds: int) -> tuple[str, str]:
    """A new bound token for `namespace/account`; (token, expiry as RFC 3339)."""
    answer = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": max(int(seconds), MIN_SECONDS)}}, _preload_content=False
    )
    status = json.loads(answer.data)["status"]
    return status["token"], status["expirationTimestamp"]


def _write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with a file only its owner reads."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class TokenKeeper:
    """Keeps one ServiceAccount's token valid in `path`, starting from `kubeconfig`'s token."""

    kubeconfig: str
    path: Path
    seconds: int = CONTROLLER_SECONDS
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        doc = yaml.safe_load(self.kubeconfig)
        self.initial = str(doc["users"][0]["user"]["token"])
        self.server, self.ca = cluster_server(self.kubeconfig), cluster_ca(self.kubeconfig)
        self.namespace, self.account = account_of(self.initial)
        self._lock = threading.Lock()

    def current(self) -> str:
        """The valid token that expires last (the file's, after a renewal; else the stack's)."""
        now = self.clock()
        held = [self.initial]
        if self.path.exists():
            held.append(self.path.read_text().strip())
        valid = [t for t in held if t and expires(t) > now]
        if not valid:
            raise TokenExpiredError(
                f"every token of {self.namespace}/{self.account} has expired: run `pulumi up` to issue a new one"
            )
        return max(valid, key=expires)

    def renew_if_due(self) -> bool:
        """Write a fresh token when the current one is past RENEW_AT of its life; True if renewed."""
        with self._lock:
            token = self.current()
            if self.path.exists() and self.path.read_text().strip() == token and not renew_due(token, self.clock()):
                return False
            if renew_due(token, self.clock()):
                core = core_api(token_kubeconfig(self.server, self.ca, token))
                token, expiry = request_token(core, self.namespace, self.account, self.seconds)
                log.info("renewed the token of %s/%s, valid until %s", self.namespace, self.account, expiry)
            _write_private(self.path, token + "\n")
            return True

    def run(self, stop: threading.Event, interval: float = 60.0) -> None:
        """Renew until `stop` is set; a failed renewal is retried at the next interval."""
        while True:
            try:
                self.renew_if_due()
            except TokenExpiredError:
                raise
            except Exception as exc:  # the API server may be briefly away; the token is still valid
                log.warning("renewing the token of %s/%s failed: %s", self.namespace, self.account, exc)
            if stop.wait(interval):
                return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.ops.bound_token",
        description="Keep a ServiceAccount's bound token valid in a file (for a client reading tokenFile).",
    )
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig holding the token the stack issued")
    parser.add_argument("--token-file", required=True, type=Path, help="where the current token is kept")
    parser.add_argument("--seconds", type=int, default=CONTROLLER_SECONDS, help="life of each renewed token")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between checks")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    keeper = TokenKeeper(Path(args.kubeconfig).read_text(), args.token_file, args.seconds)
    stop = threading.Event()
    try:
        keeper.run(stop, args.interval)
    except TokenExpiredError as exc:
        log.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
