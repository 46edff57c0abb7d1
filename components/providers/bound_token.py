"""BoundToken: a bound, expiring ServiceAccount token (TokenRequest), as a secret output.

Issued with `issuer`'s kubeconfig for `namespace/account`. Every preview compares its expiry with
the clock: once less than `renew_before_seconds` of it is left (or the account was replaced), the
resource is replaced, so the next `up` issues a fresh token before the old one lapses and a
preview never sees a token about to expire. A bound token cannot be revoked alone: deleting (or
replacing) its ServiceAccount revokes it, which destroy does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult

from components.kube.bound_token import request_token, seconds_left
from components.kube.client import core_api
from components.providers.base import Provider, ProviderResource

IDENTITY = ("namespace", "account", "account_uid", "seconds")


class BoundTokenProvider(Provider):
    REPLACES = IDENTITY
    UPDATES = ("renew_before_seconds",)
    CONNECTION = ("issuer",)
    OUTPUTS = ("token", "expires")
    SECRETS = ("issuer",)
    SECRET_OUTPUTS = ("token",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        token, expiry = request_token(
            core_api(props["issuer"]), props["namespace"], props["account"], int(props["seconds"])
        )
        return CreateResult(
            id_=f"{props['namespace']}/{props['account']}", outs={**props, "token": token, "expires": expiry}
        )

    def replaces(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
        """An identity change, or a token in its renewal window: a fresh token."""
        out = super().replaces(olds, news)
        if seconds_left(olds.get("expires"), time.time()) < float(news["renew_before_seconds"]):
            out.append("expires")
        return out

    # No look: a token cannot be read back; whether it is still good is the diff's question.


class BoundToken(ProviderResource, module="gpu-tenancy", name="BoundToken"):
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
                "issuer": issuer,
                "namespace": namespace,
                "account": account,
                "account_uid": account_uid,
                "seconds": seconds,
                "renew_before_seconds": renew_before_seconds,
            },
            opts,
        )
