"""Bound ServiceAccount tokens (TokenRequest), and a keeper that renews one before it expires.

Why bound tokens: a legacy token Secret never expires and is never rotated. A bound token carries
an expiry, is tied to its ServiceAccount (deleting the account revokes every token it was given)
and names the account in audit logs. Each identity renews only itself (`create` on its own
`serviceaccounts/token`, see `self_renewal_rules`), so no controller can mint another's token.

The keeper is what the lab's controllers run with: it starts from the token the stack issued,
keeps the newest valid token in a file, and renews it once RENEW_AT of its life has passed (kubelet
renews projected tokens at 80 %). A client reads the file (client-go's `tokenFile` re-reads it every
minute; the release controller reads it before each request), so nothing restarts on renewal.

CLI (the KWOK container's keeper): `python -m components.kube.bound_token --kubeconfig K --token-file F`.
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
from typing import TYPE_CHECKING, Any

from components.kube.client import KubeconfigError, core_api, current_context, get_json, token_kubeconfig

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

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


def issued_at(token: str) -> float:
    """When a token was issued (`iat`, else `nbf`; 0 when it says neither)."""
    c = claims(token)
    return float(c.get("iat", c.get("nbf", 0)))


def account_of(token: str) -> tuple[str, str]:
    """(namespace, name) of the ServiceAccount a bound token was issued to."""
    sub = str(claims(token).get("sub", ""))
    if not sub.startswith(SA_PREFIX) or sub.count(":") != 3:
        raise ValueError(f"token subject {sub!r} is not a ServiceAccount")
    namespace, name = sub[len(SA_PREFIX) :].split(":")
    return namespace, name


def renew_due(token: str, now: float) -> bool:
    issued, exp = issued_at(token), expires(token)
    return now >= issued + RENEW_AT * (exp - issued)


def request_token(core: CoreV1Api, namespace: str, account: str, seconds: int) -> tuple[str, str]:
    """A new bound token for `namespace/account`; (token, expiry as RFC 3339)."""
    body = {"spec": {"expirationSeconds": max(int(seconds), MIN_SECONDS)}}
    status = get_json(core.create_namespaced_service_account_token, account, namespace, body)["status"]
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
    """Keeps one ServiceAccount's token valid in `path`, starting from `kubeconfig`'s token (its
    current context's user).

    It serves the newest token it holds and judges renewal on that one alone: the stack's token may
    outlive every renewal (7 days against CONTROLLER_SECONDS), and judging the token that expires
    last would find it due at every check once it passed RENEW_AT, asking for a token each time.
    """

    kubeconfig: str
    path: Path
    seconds: int = CONTROLLER_SECONDS
    clock: Callable[[], float] = time.time
    # Makes the client a renewal is asked with (from a token kubeconfig); a fake in tests.
    connect: Callable[[str], Any] = core_api

    def __post_init__(self) -> None:
        current = current_context(self.kubeconfig)
        token = current.user.get("token")
        if not isinstance(token, str) or not token:
            raise KubeconfigError(
                f"kubeconfig user {current.user_name!r} (context {current.name!r}) has no token: "
                "the keeper renews a ServiceAccount's bound token"
            )
        self.initial = token
        self.server, self.ca = current.cluster_field("server"), current.cluster_field("certificate-authority-data")
        self.namespace, self.account = account_of(self.initial)
        self._lock = threading.Lock()  # the held tokens
        self._renewing = threading.Lock()  # one renewal at a time; readers never wait for it
        self._held = [self.initial, *self._kept()]
        self._written: str | None = None

    def _kept(self) -> list[str]:
        """The token a previous run left in the file, if it is a token of the same account."""
        try:
            token = self.path.read_text().strip()
            if token and account_of(token) == (self.namespace, self.account):
                return [token]
            if token:
                log.warning("ignoring the token file %s: a token of %s/%s", self.path, *account_of(token))
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.warning("ignoring the token file %s: %s", self.path, exc)
        return []

    def current(self) -> str:
        """The token served: the valid token issued last (a renewal once there is one, else the
        stack's; after a `pulumi up` issued a newer one, that one)."""
        now = self.clock()
        with self._lock:
            self._held = [t for t in self._held if expires(t) > now]
            if not self._held:
                raise TokenExpiredError(
                    f"every token of {self.namespace}/{self.account} has expired: run `pulumi up` to issue a new one"
                )
            return max(self._held, key=lambda t: (issued_at(t), expires(t)))

    def renew_if_due(self) -> bool:
        """Keep the file holding the served token, and renew that token once it is past RENEW_AT
        of its life; True if the file was written."""
        with self._renewing:
            token = self.current()
            wrote = self._serve(token)  # first, so a failed renewal still leaves a valid token there
            if renew_due(token, self.clock()):
                core = self.connect(token_kubeconfig(self.server, self.ca, token))
                token, expiry = request_token(core, self.namespace, self.account, self.seconds)
                with self._lock:
                    self._held.append(token)
                log.info("renewed the token of %s/%s, valid until %s", self.namespace, self.account, expiry)
                wrote = self._serve(token)
            return wrote

    def _serve(self, token: str) -> bool:
        if token == self._written:
            return False
        _write_private(self.path, token + "\n")
        self._written = token
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


def main(argv: list[str] | None = None, prog: str = "python -m components.kube.bound_token") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Keep a ServiceAccount's bound token valid in a file (for a client reading tokenFile).",
    )
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig holding the token the stack issued")
    parser.add_argument("--token-file", required=True, type=Path, help="where the current token is kept")
    parser.add_argument("--seconds", type=int, default=CONTROLLER_SECONDS, help="life of each renewed token")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between checks")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        keeper = TokenKeeper(Path(args.kubeconfig).read_text(), args.token_file, args.seconds)
    except (OSError, ValueError) as exc:  # no such file, no usable context, no ServiceAccount token
        log.error("%s: %s", args.kubeconfig, exc)
        return 2
    stop = threading.Event()
    try:
        keeper.run(stop, args.interval)
    except TokenExpiredError as exc:
        log.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
