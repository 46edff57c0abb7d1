"""A stand-in for HAMi's admission webhook (HAMi's scheduler cannot be built in CI): it answers
as HAMi's does, served over TLS from this process, for a real API server to call."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from tests.support.cluster import free_port


class StandInMutator(BaseHTTPRequestHandler):
    """Answers AdmissionReview v1beta1 (what HAMi's chart declares) with HAMi's mutation; while
    `down`, with 503, as a webhook behind a broken tunnel (failurePolicy Ignore: pods unchanged)."""

    down = False

    def do_POST(self):  # noqa: N802 - http.server API
        if StandInMutator.down:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        patch = [{"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"}]
        body = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {
                "uid": review["request"]["uid"],
                "allowed": True,
                "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
            },
        }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def serve_tls(
    handler: type[BaseHTTPRequestHandler], crt: Path, key: Path, port: int | None = None
) -> tuple[HTTPServer, int]:
    """`handler` on 127.0.0.1 (`port`, else a free one) over TLS with `crt`/`key`, in a daemon
    thread: (server, port)."""
    port = port or free_port()
    server = HTTPServer(("127.0.0.1", port), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port
