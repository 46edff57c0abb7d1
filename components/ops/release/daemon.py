"""The release controller as a process: `/metrics`, `/healthz` and `/readyz` over HTTP, the
watchdog that exits once it is unhealthy (so a supervisor restarts it), the keeper of its bound
token, and the command line (`python -m components.ops.release`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from components.config.names import MOCK_GPU_NODE_LABEL
from components.ops.bound_token import TokenExpiredError, TokenKeeper
from components.ops.kube import core_api
from components.ops.release.controller import STUCK_SECONDS, WORKERS, ReleaseController

log = logging.getLogger("gpu-tenancy.release-controller")

# Where /metrics, /healthz and /readyz are served (the image exposes it).
DEFAULT_PORT = 9400


def serve_http(controller: ReleaseController, host: str, port: int) -> ThreadingHTTPServer:
    """/metrics, /healthz (making progress) and /readyz (first list done), in a thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(controller.metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                ok, why = controller.health()
                body, ctype, code = f"{why}\n".encode(), "text/plain", 200 if ok else 503
            elif self.path.startswith("/readyz"):
                ok = controller.synced.is_set()
                body, ctype, code = (b"ok\n" if ok else b"not synced\n"), "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="release-controller-http", daemon=True).start()
    return server


def exit_when_unhealthy(controller: ReleaseController, grace: float, interval: float = 5.0) -> threading.Thread:
    """Exit the process once the controller has been unhealthy for `grace` seconds, so that
    whatever runs it (Docker's restart policy in the lab) starts a fresh one."""

    def watchdog() -> None:
        bad_since: float | None = None
        while not controller.stopping.wait(interval):
            ok, why = controller.health()
            if ok or not controller.synced.is_set():
                bad_since = None
                continue
            bad_since = bad_since or time.monotonic()
            if time.monotonic() - bad_since >= grace:
                log.error("unhealthy for %.0f s (%s): exiting so that it is restarted", grace, why)
                logging.shutdown()
                os._exit(3)

    thread = threading.Thread(target=watchdog, name="watchdog", daemon=True)
    thread.start()
    return thread


def keep_token(keeper: TokenKeeper, controller: ReleaseController) -> None:
    """Renew the controller's token until it stops; with every token expired, stop it (exit)."""
    try:
        keeper.run(controller.stopping)
    except TokenExpiredError as exc:
        log.error("%s", exc)
        controller.stop()


def _label(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected LABEL=VALUE, got {value!r}")
    return key, val


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.ops.release",
        description="Finish HAMi's allocation for GPU pods on mock-GPU nodes (what a real device plugin does).",
    )
    parser.add_argument("--kubeconfig", required=True, help="path of the tenant's kubeconfig")
    parser.add_argument("--namespace", help="only pods in this namespace (default: all)")
    parser.add_argument(
        "--node-selector",
        type=_label,
        default=MOCK_GPU_NODE_LABEL,
        metavar="LABEL=VALUE",
        help="release only on nodes with this label (default %(default)s, what the stack's inventory sets)",
    )
    parser.add_argument("--any-node", action="store_true", help="release on every node (a cluster of mock GPUs only)")
    parser.add_argument("--listen", default=f"127.0.0.1:{DEFAULT_PORT}", help="HOST:PORT for /metrics and /healthz")
    parser.add_argument("--once", action="store_true", help="one pass over the pods as they are now, then exit")
    parser.add_argument("--workers", type=int, default=WORKERS, help="pods handled at once (default %(default)s)")
    parser.add_argument(
        "--stuck-seconds",
        type=float,
        default=STUCK_SECONDS,
        help="unhealthy when a pod bound to a mock node is still allocating after this (default %(default)s)",
    )
    parser.add_argument(
        "--exit-when-unhealthy",
        type=float,
        metavar="SECONDS",
        help="exit (code 3) once /healthz has failed this long, so a supervisor restarts the controller",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="keep the kubeconfig's bound token renewed in this file and use it (components.ops.bound_token)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    with open(args.kubeconfig) as f:
        kubeconfig = f.read()
    keeper = TokenKeeper(kubeconfig, args.token_file) if args.token_file else None
    if keeper is not None:
        try:
            keeper.renew_if_due()
        except TokenExpiredError as exc:
            log.error("%s", exc)
            return 2
    core = core_api(kubeconfig, connections=args.workers + 2, token=keeper.current if keeper else None)
    controller = ReleaseController(
        core,
        namespace=args.namespace,
        node_label=None if args.any_node else args.node_selector,
        workers=args.workers,
        stuck_seconds=args.stuck_seconds,
    )
    if args.once:
        controller.relist()
        controller.drain()
        return 0
    host, _, port = args.listen.rpartition(":")
    server = serve_http(controller, host or "0.0.0.0", int(port))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    if args.exit_when_unhealthy is not None:
        exit_when_unhealthy(controller, args.exit_when_unhealthy)
    if keeper is not None:
        threading.Thread(target=keep_token, args=(keeper, controller), name="token", daemon=True).start()
    log.info("release controller: metrics and health on http://%s:%s", host, port)
    controller.run()
    server.shutdown()
    return 0
