"""The release controller as a process: `/metrics`, `/healthz` and `/readyz` over HTTP, the
watchdog that exits once the controller itself is unhealthy (so a supervisor restarts it), the
keeper of its bound token, and the command line (`python -m components.controllers.release`).

The HTTP server listens on loopback unless told otherwise: in the lab the controller's container
sits on a network every tenant's workers reach, and nothing outside the container needs the port
(Docker's healthcheck runs inside it; `python -m components.controllers.release.scrape` reads the metrics
there). Each request has REQUEST_SECONDS to arrive and be answered, and at most MAX_HANDLERS are
served at once (one more is hung up at once), so slow or many callers cannot pile up threads.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from components.controllers.release import readmit
from components.controllers.release.controller import QUEUE_SECONDS, STUCK_SECONDS, WORKERS, ReleaseController
from components.controllers.release.scrape import DEFAULT_HOST, DEFAULT_PORT
from components.domain.names import MOCK_GPU_NODE_LABEL
from components.kube.bound_token import TokenExpiredError, TokenKeeper
from components.kube.client import core_api

log = logging.getLogger("gpu-tenancy.release-controller")

# Seconds a caller has to send its request (and read the answer) before it is hung up.
REQUEST_SECONDS = 5.0
# Requests served at once; more are hung up without an answer.
MAX_HANDLERS = 8


class _BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most `handlers` request threads: past that, a connection is
    closed at once instead of starting one more thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], handlers: int):
        self._slots = threading.BoundedSemaphore(handlers)
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._slots.release()


def serve_http(
    controller: ReleaseController,
    host: str,
    port: int,
    *,
    timeout: float = REQUEST_SECONDS,
    handlers: int = MAX_HANDLERS,
) -> ThreadingHTTPServer:
    """/metrics, /healthz (the controller makes progress; counts only) and /readyz (first list
    done), in a thread; each request bounded by `timeout`, at most `handlers` at once."""

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            self.timeout = timeout
            super().setup()

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

    server = _BoundedServer((host, port), Handler, handlers)
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


class _Parser(argparse.ArgumentParser):
    """Errors in one line naming the argument, exit code 2 (argparse's convention), no usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _label(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected LABEL=VALUE, got {value!r}")
    return key, val


def _pod_key(value: str) -> tuple[str, str]:
    try:
        (key,) = readmit.parse([value])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return key


def _listen(value: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (loopback); the port is required."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port from 1 to 65535, got {value!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in host and not value.startswith("["):
        raise argparse.ArgumentTypeError(f"an IPv6 host goes in brackets ([::1]:{port}), got {value!r}")
    return host or DEFAULT_HOST, int(port)


def _at_least_one(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return number


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return number


def _level(value: str) -> str:
    if not isinstance(logging.getLevelName(value.upper()), int):
        raise argparse.ArgumentTypeError(f"expected DEBUG, INFO, WARNING or ERROR, got {value!r}")
    return value.upper()


def main(argv: list[str] | None = None, prog: str = "python -m components.controllers.release") -> int:
    parser = _Parser(
        prog=prog,
        description="Finish HAMi's allocation for GPU pods on mock-GPU nodes (what a real device plugin does).",
    )
    parser.add_argument("--kubeconfig", required=True, help="path of the tenant's kubeconfig")
    parser.add_argument("--namespace", help="only pods in this namespace (default: all)")
    parser.add_argument(
        "--node-selector",
        type=_label,
        default=MOCK_GPU_NODE_LABEL,
        metavar="LABEL=VALUE",
        help="release only on nodes with this label (default: what the stack's inventory sets)",
    )
    parser.add_argument("--any-node", action="store_true", help="release on every node (a cluster of mock GPUs only)")
    parser.add_argument(
        "--listen",
        type=_listen,
        default=(DEFAULT_HOST, DEFAULT_PORT),
        metavar="HOST:PORT",
        help=f"where /metrics, /healthz and /readyz are served (default {DEFAULT_HOST}:{DEFAULT_PORT}, loopback)",
    )
    parser.add_argument("--once", action="store_true", help="one pass over the pods as they are now, then exit")
    parser.add_argument(
        "--workers", type=_at_least_one, default=WORKERS, help="pods handled at once (default %(default)s)"
    )
    parser.add_argument(
        "--stuck-seconds",
        type=_seconds,
        default=STUCK_SECONDS,
        help="report a pod bound to a mock node and still allocating after this, in the gpu_tenancy_pods_stuck "
        "gauge and an Event on the pod; never a reason to restart (default %(default)s)",
    )
    parser.add_argument(
        "--max-queue-wait",
        type=_seconds,
        default=QUEUE_SECONDS,
        metavar="SECONDS",
        help="unhealthy when a pod ready for a worker has waited this long (default %(default)s)",
    )
    parser.add_argument(
        "--exit-when-unhealthy",
        type=_seconds,
        metavar="SECONDS",
        help="exit (code 3) once the controller itself has been unhealthy this long (its watch, its workers, "
        "its queue), so a supervisor restarts it",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="keep the kubeconfig's bound token renewed in this file and use it (components.kube.bound_token)",
    )
    parser.add_argument(
        "--readmit",
        type=_pod_key,
        action="append",
        default=[],
        metavar="NAMESPACE/NAME",
        help="a bare pod of the stack's to make again when a kubelet refuses it at admission (a restarted "
        "worker whose device plugin has not registered yet); repeatable",
    )
    parser.add_argument("--log-level", type=_level, default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        with open(args.kubeconfig) as f:
            kubeconfig = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"argument --kubeconfig: cannot read {args.kubeconfig}: {getattr(exc, 'strerror', None) or exc}")
    keeper = None
    if args.token_file:
        try:
            keeper = TokenKeeper(kubeconfig, args.token_file)
        except (OSError, ValueError) as exc:  # no usable context, no ServiceAccount token (a certificate)
            parser.error(f"argument --token-file: {exc}")
        try:
            keeper.renew_if_due()
        except TokenExpiredError as exc:
            log.error("%s", exc)
            return 2
        except Exception as exc:  # the API unreachable now: the keeper tries again while running
            log.warning("renewing the token at start failed (%s); trying again later", exc)
    try:
        core = core_api(kubeconfig, connections=args.workers + 2, token=keeper.current if keeper else None)
    except Exception as exc:  # not YAML, no current context, a CA or key that does not load
        parser.error(f"argument --kubeconfig: {args.kubeconfig}: {exc}")
    controller = ReleaseController(
        core,
        namespace=args.namespace,
        node_label=None if args.any_node else args.node_selector,
        workers=args.workers,
        stuck_seconds=args.stuck_seconds,
        queue_seconds=args.max_queue_wait,
        readmit=args.readmit,
    )
    if args.once:
        controller.relist()
        controller.drain()
        return 0
    host, port = args.listen
    try:
        server = serve_http(controller, host, port)
    except OSError as exc:  # in use, not an address of this host
        parser.error(f"argument --listen: cannot listen on {host}:{port}: {exc.strerror or exc}")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    if args.exit_when_unhealthy is not None:
        exit_when_unhealthy(controller, args.exit_when_unhealthy)
    if keeper is not None:
        threading.Thread(target=keep_token, args=(keeper, controller), name="token", daemon=True).start()
    log.info("release controller: metrics and health on http://%s:%s", host, port)
    try:
        controller.run()
    finally:
        server.shutdown()
        server.server_close()
    return 0
