"""A TCP forwarder in front of the test API server, so a test can drop a client's connections
(a watch cut mid-stream, as a flaky network or a load balancer does) and refuse new ones for a
while, without touching the API server itself."""

from __future__ import annotations

import socket
import threading

from tests.support.cluster import free_port


class TcpProxy:
    def __init__(self, target_port: int, port: int | None = None):
        self.target = ("127.0.0.1", target_port)
        self.port = port or free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._refusing = threading.Event()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self, refuse: bool = False) -> None:
        """Drop every open connection; with `refuse`, also close new ones until `restore()`."""
        if refuse:
            self._refusing.set()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self) -> None:
        self._refusing.clear()

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def kubeconfig(self, kubeconfig_text: str, real_port: int) -> str:
        """The same kubeconfig, pointed at this proxy (the server cert covers 127.0.0.1)."""
        return kubeconfig_text.replace(f"127.0.0.1:{real_port}", f"127.0.0.1:{self.port}")
