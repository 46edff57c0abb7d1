"""The bound-token rules without an API server: when the stack replaces a token (the clock against
its expiry, a replaced account), when a keeper renews one, and what it reads from a token."""

import base64
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from components.ops import bound_token as bt
from components.providers.bound_token import BoundTokenProvider


def jwt(claims: dict) -> str:
    def part(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.sig"


def rfc3339(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


OLDS = {
    "issuer": "k",
    "namespace": "kube-system",
    "account": "gpu-tenancy-releaser",
    "account_uid": "u1",
    "seconds": 7 * 86400,
    "renew_before_seconds": 2 * 86400,
}


@pytest.mark.parametrize(
    ("left", "change", "replaces"),
    [
        (5 * 86400, {}, []),
        (5 * 86400, {"account_uid": "u2"}, ["account_uid"]),  # the account was replaced: its tokens are void
        (5 * 86400, {"seconds": 86400}, ["seconds"]),
        (86400, {}, ["expires"]),  # inside the renewal window: the next `up` issues a new one
        (-60, {}, ["expires"]),  # expired while the lab was off
    ],
)
def test_the_stack_replaces_a_token_in_its_renewal_window_or_for_a_new_account(left, change, replaces):
    diff = BoundTokenProvider().diff("id", {**OLDS, "expires": rfc3339(left)}, {**OLDS, **change})
    assert diff.replaces == replaces and diff.changes is bool(replaces)
    assert diff.delete_before_replace is False  # the new token exists before the old one is dropped


def test_a_new_issuer_credential_alone_is_an_update_that_keeps_the_token():
    provider = BoundTokenProvider()
    olds = {**OLDS, "expires": rfc3339(5 * 86400), "token": "t"}
    diff = provider.diff("id", olds, {**OLDS, "issuer": "k2"})
    assert diff.changes is True and diff.replaces == []
    assert provider.update("id", olds, {**OLDS, "issuer": "k2"}).outs["token"] == "t"


def test_a_keeper_renews_after_two_thirds_of_a_tokens_life():
    now = time.time()
    token = jwt({"iat": now, "exp": now + 3000, "sub": "system:serviceaccount:kube-system:kwok"})
    assert not bt.renew_due(token, now + 1999)
    assert bt.renew_due(token, now + 2001)
    assert bt.account_of(token) == ("kube-system", "kwok")
    assert bt.expires(token) == now + 3000


@pytest.mark.parametrize("sub", ["system:admin", "system:serviceaccount:only-namespace", ""])
def test_a_token_not_of_a_service_account_is_refused_by_name(sub):
    with pytest.raises(ValueError, match="not a ServiceAccount"):
        bt.account_of(jwt({"exp": 1, "sub": sub}))


def test_renewal_rights_name_one_account():
    (rule,) = bt.self_renewal_rules("gpu-tenancy-kwok")
    assert rule == {
        "apiGroups": [""],
        "resources": ["serviceaccounts/token"],
        "resourceNames": ["gpu-tenancy-kwok"],
        "verbs": ["create"],
    }
