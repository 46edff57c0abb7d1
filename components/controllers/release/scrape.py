"""`python -m components.controllers.release.scrape [PATH]`: print the controller's /metrics (or
/healthz, /readyz) as served on loopback, from inside its container, where the port is bound
(the lab's network reaches every tenant's workers, so it listens nowhere else). Exit code 0 when
the answer is 200, 1 otherwise: the image's HEALTHCHECK is `scrape /healthz`.

Usage on the lab host: `docker exec <lab>-<tenant>-releaser python -m components.controllers.release.scrape`.
It imports nothing but the standard library (the healthcheck runs it every 10 s), so the
controller's address is defined here and the daemon takes it from here.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

# Where the controller serves /metrics, /healthz and /readyz by default (the image's too).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9400


def main(argv: list[str] | None = None, prog: str = "python -m components.controllers.release.scrape") -> int:
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else "/metrics"
    if len(args) > 1 or not path.startswith("/"):
        print(f"usage: {prog} [/metrics|/healthz|/readyz]", file=sys.stderr)
        return 2
    try:
        with urllib.request.urlopen(f"http://{DEFAULT_HOST}:{DEFAULT_PORT}{path}", timeout=3) as resp:
            sys.stdout.write(resp.read().decode())
            return 0
    except urllib.error.HTTPError as exc:
        sys.stdout.write(exc.read().decode(errors="replace"))
        return 1
    except OSError as exc:
        print(f"nothing answers on {DEFAULT_HOST}:{DEFAULT_PORT} ({exc})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
