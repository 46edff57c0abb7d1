"""BootstrapToken: one short-lived kubeadm bootstrap token in a tenant, as a secret output.

Created with an expiration (the tenant's tokencleaner deletes it then); NodeMembership revokes it
as soon as its join is done; destroy deletes what is left. Refresh does not look it up: a token
that expired or was revoked on purpose is not drift.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.ops.bootstrap import create_token, delete_token
from components.ops.kube import core_api


class BootstrapTokenProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        token, expiration = create_token(
            core_api(props["kubeconfig"]), props["token_id"], int(props["ttl_seconds"]), props["description"]
        )
        return CreateResult(id_=props["token_id"], outs={**props, "token": token, "expiration": expiration})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("token_id", "ttl_seconds") if olds.get(k) != news.get(k)]
        changed = bool(replaces) or any(olds.get(k) != news.get(k) for k in ("kubeconfig", "description"))
        return DiffResult(changes=changed, replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "token": olds.get("token"), "expiration": olds.get("expiration")})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Only this resource's own token: a replacement may already hold the same id.
        delete_token(core_api(props["kubeconfig"]), props["token_id"], props.get("token"))


class BootstrapToken(Resource, module="gpu-tenancy", name="BootstrapToken"):
    """`token` (`<id>.<secret>`) valid for `ttl_seconds` from its creation."""

    token: pulumi.Output[str]
    expiration: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        token_id: pulumi.Input[str],
        ttl_seconds: int,
        description: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            BootstrapTokenProvider(),
            name,
            {
                "kubeconfig": pulumi.Output.secret(kubeconfig),
                "token_id": token_id,
                "ttl_seconds": ttl_seconds,
                "description": description,
                "token": None,
                "expiration": None,
            },
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["token"])),
        )
