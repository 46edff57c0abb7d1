"""ServiceAccountToken: the token of a service-account-token Secret, as a secret output.

`pulumi up` waits until the tenant's token controller has written it (a plain Secret read
could run before that and see nothing). Read (refresh) looks once, without waiting.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.ops.kube import core_api
from components.ops.service_account_token import read_token, wait_for_token


class ServiceAccountTokenProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        token = wait_for_token(
            core_api(props["kubeconfig"]), props["namespace"], props["secret"], float(props["timeout_seconds"])
        )
        return CreateResult(id_=f"{props['namespace']}/{props['secret']}", outs={**props, "token": token})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("namespace", "secret", "secret_uid") if olds.get(k) != news.get(k)]
        changed = replaces or [k for k in ("kubeconfig", "timeout_seconds") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "token": olds.get("token")})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        token = read_token(core_api(props["kubeconfig"]), props["namespace"], props["secret"])
        if token is None:
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs={**props, "token": token})


class ServiceAccountToken(Resource, module="gpu-tenancy", name="ServiceAccountToken"):
    """The token of Secret `namespace/secret`, once issued."""

    token: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        namespace: str,
        secret: str,
        secret_uid: pulumi.Input[str],
        timeout_seconds: int = 120,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            ServiceAccountTokenProvider(),
            name,
            {
                "kubeconfig": pulumi.Output.secret(kubeconfig),
                "namespace": namespace,
                "secret": secret,
                "secret_uid": secret_uid,
                "timeout_seconds": timeout_seconds,
                "token": None,
            },
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["token"])),
        )
