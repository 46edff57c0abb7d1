"""BoundToken: a bound, expiring ServiceAccount token (TokenRequest), as a secret output.

Issued with `issuer`'s kubeconfig for `namespace/account`. Every preview compares its expiry with
the clock: once less than `renew_before_seconds` of it is left (or the account was replaced), the
resource is replaced, so the next `up` issues a fresh token before the old one lapses and a
preview never sees a token about to expire. A bound token cannot be revoked alone: deleting (or
replacing) its ServiceAccount revokes it, which destroy does.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.ops.bound_token import request_token, seconds_left
from components.ops.kube import core_api

IDENTITY = ("namespace", "account", "account_uid", "seconds")


class BoundTokenProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        token, expiry = request_token(
            core_api(props["issuer"]), props["namespace"], props["account"], int(props["seconds"])
        )
        return CreateResult(
            id_=f"{props['namespace']}/{props['account']}", outs={**props, "token": token, "expires": expiry}
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in IDENTITY if olds.get(k) != news.get(k)]
        if seconds_left(olds.get("expires"), time.time()) < float(news["renew_before_seconds"]):
            replaces.append("expires")
        changed = replaces or [k for k in ("issuer", "renew_before_seconds") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "token": olds.get("token"), "expires": olds.get("expires")})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # A token cannot be read back; whether it is still good is the diff's question.
        return ReadResult(id_=id_, outs=props)


class BoundToken(Resource, module="gpu-tenancy", name="BoundToken"):
    """`token`, valid until `expires` (RFC 3339)."""

    token: pulumi.Output[str]
    expires: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        issuer: pulumi.Input[str],
        namespace: str,
        account: str,
        account_uid: pulumi.Input[str],
        seconds: int,
        renew_before_seconds: int,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            BoundTokenProvider(),
            name,
            {
                "issuer": pulumi.Output.secret(issuer),
                "namespace": namespace,
                "account": account,
                "account_uid": account_uid,
                "seconds": seconds,
                "renew_before_seconds": renew_before_seconds,
                "token": None,
                "expires": None,
            },
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["token"])),
        )
