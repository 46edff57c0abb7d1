"""The bound-token rules without an API server: when the stack replaces a token (the clock against
its expiry, a replaced account), when a keeper renews one, and what it reads from a token."""

import base64
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from components.kube import bound_token as bt
from components.kube.team_token import token_seconds_left
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


DAY = 86400.0
START = 1_900_000_000.0  # a fixed fake epoch


class FakeTokenApi:
    """TokenRequest on a fake clock: each token is issued now for the seconds asked, and counted."""

    def __init__(self, clock):
        self.clock = clock
        self.issued: list[str] = []
        self.down = False

    def create_namespaced_service_account_token(self, name, namespace, body, _preload_content=False):
        if self.down:
            raise ConnectionError("the API server is away")
        now, seconds = self.clock(), body["spec"]["expirationSeconds"]
        token = jwt({"iat": now, "exp": now + seconds, "sub": f"system:serviceaccount:{namespace}:{name}"})
        self.issued.append(token)
        expiry = datetime.fromtimestamp(now + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return type(
            "Answer", (), {"data": json.dumps({"status": {"token": token, "expirationTimestamp": expiry}}).encode()}
        )()


def keeper_on_a_fake_clock(tmp_path, stack_seconds: float, renewal_seconds: int):
    """A keeper started from a stack token issued at START, its clock and its fake API."""
    clock = {"now": START}
    api = FakeTokenApi(lambda: clock["now"])
    stack = jwt({"iat": START, "exp": START + stack_seconds, "sub": "system:serviceaccount:kube-system:kwok"})
    keeper = bt.TokenKeeper(
        bt.token_kubeconfig("https://lab:6443", "Q0E=", stack),
        tmp_path / "token",
        seconds=renewal_seconds,
        clock=lambda: clock["now"],
        connect=lambda _kubeconfig: api,
    )
    return keeper, clock, api


def run_for(keeper, clock, days: float, interval: float = 60.0) -> None:
    """Check every `interval` seconds, as the keeper's loop does; the token served at each check
    is valid and not past its renewal point by more than one interval."""
    end = clock["now"] + days * DAY
    while clock["now"] < end:
        keeper.renew_if_due()
        served = keeper.current()
        life = bt.expires(served) - bt.issued_at(served)
        assert bt.expires(served) > clock["now"]
        assert clock["now"] < bt.issued_at(served) + bt.RENEW_AT * life + interval
        assert (keeper.path.read_text().strip()) == served
        clock["now"] += interval


def test_token_keeper_renews_once_per_period_when_stack_token_outlives_renewals(tmp_path):
    # the lab's ratio: the stack's token lives 7 days, each renewal 24 h (renewed every 16 h)
    keeper, clock, api = keeper_on_a_fake_clock(tmp_path, 7 * DAY, bt.CONTROLLER_SECONDS)
    run_for(keeper, clock, 7)
    # at day 4.67 (two thirds of the stack's token), then 16 h, 32 h and 48 h later
    assert len(api.issued) == 4
    assert keeper.current() == api.issued[-1]


def test_token_keeper_renews_once_per_period_when_renewals_outlive_stack_token(tmp_path):
    # the opposite ratio: a one-hour stack token, then 24 h renewals
    keeper, clock, api = keeper_on_a_fake_clock(tmp_path, 3600, bt.CONTROLLER_SECONDS)
    run_for(keeper, clock, 7)
    # at 40 min, then every 16 h: 0.67 h, 16.67 h, ... 160.67 h
    assert len(api.issued) == 11
    assert keeper.current() == api.issued[-1]


def test_token_keeper_serves_the_stack_token_again_when_its_renewal_lapsed_and_renews_once_back(tmp_path):
    keeper, clock, api = keeper_on_a_fake_clock(tmp_path, 7 * DAY, bt.CONTROLLER_SECONDS)
    stack = keeper.current()
    clock["now"] = START + 4.7 * DAY
    assert keeper.renew_if_due() is True and len(api.issued) == 1
    renewed = api.issued[0]
    assert keeper.current() == renewed  # the newest, though the stack's token expires later
    api.down = True
    clock["now"] += DAY + 60  # the renewal lapsed while the API server was away
    with pytest.raises(ConnectionError):
        keeper.renew_if_due()
    assert renewed != stack and keeper.current() == stack == keeper.path.read_text().strip()
    api.down = False
    assert keeper.renew_if_due() is True and len(api.issued) == 2
    assert keeper.current() == api.issued[1] == keeper.path.read_text().strip()
    assert keeper.renew_if_due() is False and len(api.issued) == 2


def test_token_keeper_restarted_serves_the_renewal_its_file_holds(tmp_path):
    keeper, clock, api = keeper_on_a_fake_clock(tmp_path, 7 * DAY, bt.CONTROLLER_SECONDS)
    clock["now"] = START + 5 * DAY
    keeper.renew_if_due()
    again = bt.TokenKeeper(keeper.kubeconfig, keeper.path, clock=lambda: clock["now"], connect=lambda _k: api)
    assert again.current() == api.issued[0]
    again.renew_if_due()
    assert len(api.issued) == 1
    # a file holding another account's token is not served
    keeper.path.write_text(jwt({"iat": START, "exp": START + 9 * DAY, "sub": "system:serviceaccount:x:other"}))
    other = bt.TokenKeeper(keeper.kubeconfig, keeper.path, clock=lambda: clock["now"], connect=lambda _k: api)
    assert bt.account_of(other.current()) == ("kube-system", "kwok")


def test_a_team_token_s_time_left_is_read_by_the_one_decoder():
    assert token_seconds_left(jwt({"exp": 1000}), now=400) == 600
    assert token_seconds_left(jwt({"sub": "no expiry"}), now=0) is None
    for broken in ("", "not-a-jwt", "a.%%%.c", "a.b"):
        assert token_seconds_left(broken, now=0) is None, broken
