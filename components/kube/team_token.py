"""A team's management-cluster token: a bound, expiring ServiceAccount token (TokenRequest) of the
account TeamAccess made for the team, minted by the platform owner and handed to the team stack
as its secret config `managementToken`, never written to disk or put on a command line.

    <admin kubeconfig on stdin> | python -m components.kube.team_token --team team-a --hours 720 \\
        | pulumi config set --secret managementToken --stack team-a

`--show server` and `--show ca` print, instead of a token, where the team stack reaches the
management API server and its CA (`managementServer`, `managementCa`), read from the same admin
kubeconfig: `scripts/grant-team.sh` sets all three. Revoking: delete and re-create the account (every token
of it stops working), or let the token expire.
"""

from __future__ import annotations

import argparse
import sys
import time

from components.domain.names import TEAM_ACCOUNT, tenant_namespace
from components.kube.bound_token import expires, request_token
from components.kube.client import cluster_ca, cluster_server, core_api, http_status

DEFAULT_HOURS = 720
MAX_HOURS = 24 * 90


class NoSuchTeam(Exception):
    """The platform has no account for that team."""


def request_team_token(admin_kubeconfig: str, team: str, hours: int) -> str:
    core = core_api(admin_kubeconfig)
    try:
        token, _expiry = request_token(core, tenant_namespace(team), TEAM_ACCOUNT, hours * 3600)
    except Exception as exc:
        if http_status(exc) == 404:
            raise NoSuchTeam(
                f"no account {TEAM_ACCOUNT} in {tenant_namespace(team)}: is {team!r} in the platform stack's "
                "teams registry, and the platform stack up?"
            ) from None
        raise
    return token


def token_seconds_left(token: str, now: float | None = None) -> int | None:
    """Seconds until the token's `exp` claim (read, not verified: the API server verifies it);
    None when it carries none or is not a JWT."""
    try:
        return int(expires(token) - (time.time() if now is None else now))
    except (ValueError, KeyError, TypeError):  # json's and base64's errors are ValueErrors
        return None


def main(argv: list[str] | None = None, prog: str = "python -m components.kube.team_token") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--team", help="the team whose token to request (not with --show)")
    parser.add_argument(
        "--show", choices=("server", "ca"), help="print the admin kubeconfig's API server URL or its CA (base64)"
    )
    parser.add_argument("--hours", type=int, default=DEFAULT_HOURS, help=f"lifetime (1-{MAX_HOURS}, default 720)")
    args = parser.parse_args(argv)
    if not 1 <= args.hours <= MAX_HOURS:
        parser.error(f"--hours must be 1-{MAX_HOURS}, got {args.hours}")
    if (args.team is None) == (args.show is None):
        parser.error("give either --team or --show")
    admin = sys.stdin.read()
    if not admin.strip():
        parser.error("give the management cluster's admin kubeconfig on stdin")
    if args.show:
        sys.stdout.write((cluster_server if args.show == "server" else cluster_ca)(admin))
        return 0
    try:
        token = request_team_token(admin, args.team, args.hours)
    except NoSuchTeam as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
