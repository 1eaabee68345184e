"""A tiny TCP proxy for fault injection: refuse connections, or drop a response.

The local gateway answers one request per connection (``Connection: close``), so the proxy
reads one whole request, forwards it, reads the whole response, and then either returns it or
closes the client's connection without a word (the request *was* processed: a lost response).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass


@dataclass
class Exchange:
    request: bytes
    response: bytes
    dropped: bool


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class TcpProxy:
    """``with TcpProxy(host, port) as proxy: proxy.url ...``; ``down()`` / ``up()`` /
    ``drop_responses(n, prefix)`` / ``reject_requests(n, prefix)``; ``exchanges`` records
    what went through."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.exchanges: list[Exchange] = []
        self._listener: socket.socket | None = None
        self._drops: list[bytes] = []
        self._rejects: list[tuple[bytes, tuple[bytes, ...]]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> TcpProxy:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        """Listen (on the same port as before, if any)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()

    def down(self) -> None:
        """Stop listening: new connections are refused."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def drop_responses(self, count: int, request_prefix: bytes = b"POST ") -> None:
        """Drop the responses of the next ``count`` requests starting with ``request_prefix``."""
        with self._lock:
            self._drops.extend([request_prefix] * count)

    def reject_requests(
        self, count: int, request_prefix: bytes, containing: tuple[bytes, ...] = ()
    ) -> None:
        """Close the connection of the next ``count`` matching requests without forwarding
        them (the service never sees them): those starting with ``request_prefix`` and, if
        ``containing`` is given, holding one of those bytes."""
        with self._lock:
            self._rejects.extend([(request_prefix, containing)] * count)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = _read_request(conn)
            if not request:
                return
            with self._lock:
                reject = next(
                    (
                        (prefix, containing)
                        for prefix, containing in self._rejects
                        if request.startswith(prefix)
                        and (not containing or any(c in request for c in containing))
                    ),
                    None,
                )
                if reject is not None:
                    self._rejects.remove(reject)
                    self.exchanges.append(Exchange(request, b"", True))
                    return
            with socket.create_connection(self.upstream) as upstream:
                upstream.sendall(request)
                response = b""
                while chunk := upstream.recv(65536):
                    response += chunk
            with self._lock:
                drop = next((p for p in self._drops if request.startswith(p)), None)
                if drop is not None:
                    self._drops.remove(drop)
                self.exchanges.append(Exchange(request, response, drop is not None))
            if drop is None:
                conn.sendall(response)
