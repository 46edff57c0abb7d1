"""BootstrapToken: one short-lived kubeadm bootstrap token in a tenant, as a secret output.

Created with an expiration (the tenant's tokencleaner deletes it then); destroy deletes what is
left. Refresh does not look it up: a token that expired or was revoked on purpose is not drift.

Every token says what it is for (`joins`: the node labels of the machines it joins and how many
are expected; a docker worker's is its own Node, `worker_joins`) and is judged by every preview
(`join_token_verdict`): once every expected machine is a Node it is revoked (a docker worker's
NodeMembership has already done so right after its join: a token no longer held is left as it
is), and while machines are still to join a revoked, expired or nearly expired token is replaced
by a fresh one, so a join that failed, a removed machine or a raised `nodes` heals with `up` alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, UpdateResult

from components.kube.client import core_api
from components.lifecycle.bootstrap_token import (
    KEEP,
    RENEW,
    REVOKE,
    create_token,
    delete_token,
    held_token,
    join_token_verdict,
    joined_nodes,
)
from components.providers.base import Provider, ProviderResource


def _joined(kubeconfig: Any, joins: dict[str, Any]) -> int | None:
    """The pool's Nodes now, or None when the tenant cannot be asked (preview of a new tenant, an
    unreachable API server): then only the clock judges the token."""
    if not isinstance(kubeconfig, str) or not kubeconfig:
        return None
    try:
        return joined_nodes(core_api(kubeconfig), joins["labels"])
    except Exception:  # noqa: BLE001 - any failure to ask means "unknown", never a failed preview
        return None


def _verdict(props: dict[str, Any], joins: dict[str, Any], kubeconfig: Any) -> tuple[str, int | None]:
    joined = _joined(kubeconfig, joins)
    if joined is None and joins.get("keep_when_unknown"):
        return KEEP, None
    verdict = join_token_verdict(
        props.get("expiration"),
        int(props["ttl_seconds"]),
        bool(props.get("revoked")),
        joined,
        int(joins["expected"]),
        time.time(),
    )
    if verdict == REVOKE and not _still_held(kubeconfig, props):
        return KEEP, joined  # revoked already (by the join itself), or expired and cleaned up
    return verdict, joined


def _still_held(kubeconfig: Any, props: dict[str, Any]) -> bool:
    try:
        return held_token(core_api(kubeconfig), props["token_id"], props.get("token") or "") is not None
    except Exception:  # noqa: BLE001 - cannot ask: let the update try (it revokes only what it holds)
        return True


class BootstrapTokenProvider(Provider):
    # One Secret per token id: the old token goes before its successor is made.
    REPLACES = ("token_id", "ttl_seconds")
    UPDATES = ("description", "joins")
    OUTPUTS = ("token", "expiration", "revoked")
    SECRET_OUTPUTS = ("token",)
    DELETE_BEFORE_REPLACE = True

    def create(self, props: dict[str, Any]) -> CreateResult:
        token, expiration = create_token(
            core_api(props["kubeconfig"]), props["token_id"], int(props["ttl_seconds"]), props["description"]
        )
        outs = {**props, "token": token, "expiration": expiration, "revoked": False}
        return CreateResult(id_=props["token_id"], outs=outs)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        found = super().diff(id_, olds, news)
        joins = news.get("joins")
        if not joins or found.replaces:
            return found
        verdict, _ = _verdict(olds, joins, olds.get("kubeconfig"))
        if verdict == KEEP:
            return found
        replaces = ["expiration"] if verdict == RENEW else []
        return DiffResult(changes=True, replaces=replaces, delete_before_replace=self.DELETE_BEFORE_REPLACE)

    def redo_needed(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        # With joins every update judges the token again (no wait: one look at the pool's Nodes).
        return super().redo_needed(olds, news) or bool(news.get("joins"))

    def redo(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        outs = super().redo(id_, olds, news).outs
        joins = news.get("joins")
        if joins:
            verdict, _ = _verdict(olds, joins, news["kubeconfig"])
            if verdict == REVOKE:
                delete_token(core_api(news["kubeconfig"]), olds["token_id"], olds.get("token"))
                outs.update(token="", revoked=True)
        return UpdateResult(outs=outs)

    def remove(self, _id: str, props: dict[str, Any]) -> None:
        if props.get("revoked"):
            return
        # Only this resource's own token: a replacement may already hold the same id.
        delete_token(core_api(props["kubeconfig"]), props["token_id"], props.get("token"))


class BootstrapToken(ProviderResource, module="gpu-tenancy", name="BootstrapToken"):
    """`token` (`<id>.<secret>`) valid for `ttl_seconds` from its creation; `revoked` once a
    pool's expected machines have all joined (then `token` is empty)."""

    token: pulumi.Output[str]
    expiration: pulumi.Output[str]
    revoked: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        token_id: pulumi.Input[str],
        ttl_seconds: int,
        description: str,
        joins: dict[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            BootstrapTokenProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "token_id": token_id,
                "ttl_seconds": ttl_seconds,
                "description": description,
                "joins": joins,
            },
            opts,
        )
