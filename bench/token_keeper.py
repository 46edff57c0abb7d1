"""The token keeper on a fake clock: how many TokenRequests it sends over 7 days, checking every
minute as its loop does, for a few (stack token, renewal) lifetimes. No API server: each request
is answered at once with a token issued at the fake now, so the count is the keeper's alone.

Columns: requests over the 7 days; those between day 4.67 and day 6.67 (where a keeper judging
the token that expires last asks at every check); checks at which the file held another token
than the one served.

Usage: .venv/bin/python bench/token_keeper.py [days]
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.kube import bound_token as bt  # noqa: E402
from components.kube.client import token_kubeconfig  # noqa: E402

DAY = 86400.0
HOUR = 3600.0
START = 1_900_000_000.0
RATIOS = [  # (stack token's life, each renewal's life)
    (7 * DAY, bt.CONTROLLER_SECONDS),  # the lab's
    (2 * DAY, bt.CONTROLLER_SECONDS),
    (bt.CONTROLLER_SECONDS, bt.CONTROLLER_SECONDS),
    (HOUR, bt.CONTROLLER_SECONDS),
    (7 * DAY, 2 * HOUR),
]


def jwt(claims: dict[str, Any]) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.sig"


class FakeTokenApi:
    """TokenRequest answered at once on the fake clock; every request kept with its time."""

    def __init__(self, clock: dict[str, float]) -> None:
        self.clock = clock
        self.asked: list[float] = []

    def create_namespaced_service_account_token(
        self, name: str, namespace: str, body: dict[str, Any], _preload_content: bool = False
    ) -> Any:
        now, seconds = self.clock["now"], body["spec"]["expirationSeconds"]
        self.asked.append(now)
        token = jwt({"iat": now, "exp": now + seconds, "sub": f"system:serviceaccount:{namespace}:{name}"})
        expiry = datetime.fromtimestamp(now + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        data = json.dumps({"status": {"token": token, "expirationTimestamp": expiry}}).encode()
        return type("Answer", (), {"data": data})()


def run(stack_seconds: float, renewal_seconds: int, days: float, workdir: Path) -> tuple[int, int, int]:
    clock = {"now": START}
    api = FakeTokenApi(clock)
    stack = jwt({"iat": START, "exp": START + stack_seconds, "sub": "system:serviceaccount:kube-system:kwok"})
    path = workdir / f"token-{stack_seconds:.0f}-{renewal_seconds}"
    keeper = bt.TokenKeeper(
        token_kubeconfig("https://lab:6443", "Q0E=", stack),
        path,
        seconds=renewal_seconds,
        clock=lambda: clock["now"],
        connect=lambda _kubeconfig: api,
    )
    mismatched = 0
    while clock["now"] < START + days * DAY:
        keeper.renew_if_due()
        mismatched += path.read_text().strip() != keeper.current()
        clock["now"] += 60.0
    window = sum(START + 4.67 * DAY <= t < START + 6.67 * DAY for t in api.asked)
    return len(api.asked), window, mismatched


def main() -> None:
    days = float(sys.argv[1]) if len(sys.argv) > 1 else 7.0
    print(f"TokenRequests over {days:g} days on a fake clock, one check a minute")
    print(f"{'stack token':>12} {'renewal':>8} {'requests':>9} {'day 4.67-6.67':>14} {'file != served':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for stack_seconds, renewal_seconds in RATIOS:
            total, window, mismatched = run(stack_seconds, renewal_seconds, days, Path(tmp))
            print(
                f"{stack_seconds / HOUR:>11g}h {renewal_seconds / HOUR:>7g}h {total:>9} {window:>14} {mismatched:>15}"
            )


if __name__ == "__main__":
    main()
