"""The local stand-in for API Gateway: a threaded WSGI server routing to in-process handlers."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from cirrusmq_api.routing import RouteMatch, Router
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from cirrusmq_local.events import HttpRequest, HttpResponse, build_event, to_response
from cirrusmq_local.lambda_runtime import FunctionRuntime
from cirrusmq_local.local_routes import LocalRoutes
from cirrusmq_local.template import HttpRoute

__all__ = ["MAX_REQUEST_BYTES", "Gateway"]

log = logging.getLogger(__name__)
access_log = logging.getLogger("cirrusmq_local.access")

MAX_REQUEST_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
MAX_DRAIN_BYTES = 256 * 1024 * 1024  # beyond this, a too-large body is not read any further


def _error(
    status: int, code: str, message: str, headers: Iterable[tuple[str, str]] = ()
) -> HttpResponse:
    """An answer of the gateway itself (no route, too large, a function that failed); the
    handlers' answers carry their own headers (nosniff among them) and pass unchanged."""
    body = json.dumps({"code": code, "message": message}).encode()
    own = [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]
    return HttpResponse(status, [*own, *headers], body)


def _wsgi_headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").lower()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key.replace("_", "-").lower()
        else:
            continue
        if value != "":
            # WSGI headers are latin-1 decoded; recover the bytes as sent, then read UTF-8.
            headers.append((name, value.encode("latin-1").decode("utf-8", "replace")))
    return headers


def _raw_path(environ: dict[str, Any]) -> str:
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        path = raw.split("?", 1)[0]
        if "://" in path:  # absolute-form request target
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        return path or "/"
    return environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace") or "/"


class _QuietRequestHandler(WSGIRequestHandler):
    """Access lines go to the ``cirrusmq_local.access`` logger instead of stderr."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        access_log.info('%s "%s" %s %s', self.address_string(), self.requestline, code, size)

    def log(self, type: str, message: str, *args: Any) -> None:  # noqa: A002 - werkzeug's name
        getattr(log, type if type in {"info", "warning", "error"} else "info")(message, *args)


class Gateway:
    """Serves the template's HttpApi routes on ``host:port`` (0 = a free port)."""

    def __init__(
        self,
        routes: Iterable[tuple[HttpRoute, FunctionRuntime]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        local_routes: LocalRoutes | None = None,
    ) -> None:
        self.router: Router[FunctionRuntime] = Router(routes)
        self.local_routes = local_routes
        self.host = host
        self.requested_port = port
        self.max_request_bytes = max_request_bytes
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("gateway is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321`` (loopback when bound to all interfaces)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def start(self) -> Gateway:
        """Bind and serve in a background thread."""
        if self._server is not None:
            return self
        # Bind here: werkzeug prints and calls sys.exit(1) when it cannot bind itself.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
            sock.listen(128)
            self._server = make_server(
                self.host,
                self.requested_port,
                self.wsgi_app,
                threaded=True,
                request_handler=_QuietRequestHandler,
                fd=sock.fileno(),  # werkzeug duplicates it
            )
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # how fast stop() is noticed
            name="cirrusmq-gateway",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ------------------------------------------------------------------ WSGI
    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """The WSGI application: route, invoke, translate."""
        response = self.handle(environ)
        reason = _reason(response.status)
        headers = list(response.headers)
        if not any(name.lower() == "content-length" for name, _ in headers):
            headers.append(("Content-Length", str(len(response.body))))
        start_response(f"{response.status} {reason}", headers)
        return [response.body]

    def handle(self, environ: dict[str, Any]) -> HttpResponse:
        """Answer one request described by a WSGI ``environ``."""
        method = environ.get("REQUEST_METHOD", "GET").upper()
        raw_path = _raw_path(environ)
        # Read (or drain) the body first: the server closes every connection, and closing
        # with unread input makes the kernel reset it, which can eat our response.
        body = self._read_body(environ)
        if self.local_routes is not None and raw_path.startswith(self.local_routes.PREFIX):
            return self.local_routes.answer(method, raw_path, environ.get("QUERY_STRING", ""))
        match = self.router.match(method, raw_path)
        if not isinstance(match, RouteMatch):
            if match.status == 405:
                return _error(
                    405,
                    "MethodNotAllowed",
                    f"{method} is not allowed on {raw_path}",
                    [("Allow", ", ".join(match.allowed))],
                )
            return _error(404, "RouteNotFound", f"no route for {method} {raw_path}")
        if body is None:
            return _error(
                413, "RequestTooLarge", f"request body exceeds {self.max_request_bytes} bytes"
            )
        request = HttpRequest(
            method=method,
            raw_path=raw_path,
            raw_query=environ.get("QUERY_STRING", ""),
            headers=_wsgi_headers(environ),
            body=body,
            source_ip=environ.get("REMOTE_ADDR", "127.0.0.1"),
            protocol=environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
        )
        event = build_event(request, match.route.route_key, match.path_parameters)
        runtime = match.target
        try:
            return to_response(runtime.invoke(event))
        except BaseException as exc:  # incl. sys.exit() and the like: the Lambda died
            log.exception("%s failed on %s", runtime.logical_id, match.route.route_key)
            return _error(500, "InternalError", f"{runtime.logical_id} failed: {exc}")

    def _read_body(self, environ: dict[str, Any]) -> bytes | None:
        """The request body, or ``None`` when it is larger than allowed (then it is read
        and thrown away, up to :data:`MAX_DRAIN_BYTES`, so the client sees the 413)."""
        stream = environ.get("wsgi.input")
        length_text = environ.get("CONTENT_LENGTH") or ""
        if stream is None:
            return b""
        if length_text.isdigit():
            remaining: int | None = int(length_text)
        elif environ.get("wsgi.input_terminated"):
            remaining = None  # chunked: read to the end
        else:
            return b""  # no length and no chunked framing: HTTP says there is no body
        chunks: list[bytes] = []
        size = 0
        while remaining is None or remaining > 0:
            want = 65536 if remaining is None else min(65536, remaining)
            chunk = stream.read(want)
            if not chunk:
                break
            size += len(chunk)
            if remaining is not None:
                remaining -= len(chunk)
            if size <= self.max_request_bytes:
                chunks.append(chunk)
            elif size > MAX_DRAIN_BYTES:
                break
            else:
                chunks.clear()
        return None if size > self.max_request_bytes else b"".join(chunks)


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
