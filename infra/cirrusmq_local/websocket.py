"""The template's WebSocket API, locally: a real WebSocket server and the management API.

:class:`WebSocketGateway` serves the routes of ``template.websocket_routes`` over a real
socket with the ``websockets`` library (asyncio, on a thread of its own): the upgrade request
becomes a ``$connect`` event (a status other than 200 refuses the upgrade with it), each text
frame a message event routed by its ``action`` (else ``$default``), whose ``body`` goes back
as a frame (the template's route responses), and the close a ``$disconnect`` event — the
events API Gateway WebSocket APIs send to Lambda. Its callback endpoint
(:attr:`callback_url`) answers the management API's ``POST /@connections/{id}``
(``PostToConnection``: the data as one frame; 410 ``GoneException`` for a connection that is
not open) and ``DELETE /@connections/{id}`` (close), as boto3's ``apigatewaymanagementapi``
client sends them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

__all__ = ["WebSocketGateway"]

log = logging.getLogger(__name__)

Invoke = Callable[[str, dict[str, Any]], Any]
"""(route key, event) → the function's result."""


class WebSocketGateway:
    """Serves the WebSocket routes on ``host``:``port`` (0: a free port)."""

    def __init__(
        self, routes: Mapping[str, Invoke], *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._routes = dict(routes)
        self.host = host
        self._requested_port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._callbacks: ThreadingHTTPServer | None = None
        self._open: dict[str, ServerConnection] = {}
        self._ids: dict[int, str] = {}
        self._stopping = False
        self.connections_opened = 0
        """Upgrades accepted since the start."""
        self.frames_in = 0
        """Messages received from clients (API Gateway bills them, 32 KB units)."""
        self.frames_out = 0
        """Messages sent to clients: route responses and posts."""
        self._closed_seconds = 0.0
        self._opened_at: dict[str, float] = {}

    @property
    def url(self) -> str:
        """``ws://host:port``: where clients connect."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://{self.host}:{port}"

    @property
    def callback_url(self) -> str:
        """The management API endpoint (``PostToConnection``)."""
        assert self._callbacks is not None
        return f"http://{self.host}:{self._callbacks.server_address[1]}"

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def connection_seconds(self) -> float:
        """Connection time so far, closed and open connections (billed per minute on AWS)."""
        now = time.monotonic()
        return self._closed_seconds + sum(now - t for t in list(self._opened_at.values()))

    def start(self) -> WebSocketGateway:
        ready = threading.Event()
        loop = self._loop = asyncio.new_event_loop()

        async def open_server() -> None:
            self._server = await serve(
                self._serve,
                self.host,
                self._requested_port,
                process_request=self._connect,
                ping_interval=None,  # clients keep their connections alive (as on AWS)
            )
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(open_server())
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="cirrusmq-websocket", daemon=True)
        self._thread.start()
        ready.wait(10)
        self._callbacks = ThreadingHTTPServer((self.host, 0), _callback_handler(self))
        self._callbacks.daemon_threads = True
        threading.Thread(
            target=self._callbacks.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="cirrusmq-websocket-callbacks",
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        """Close every connection and both servers; idempotent."""
        if self._callbacks is not None:
            self._callbacks.shutdown()
            self._callbacks.server_close()
            self._callbacks = None
        loop, self._loop = self._loop, None
        if loop is None:
            return
        self._stopping = True  # the stack is going away: no $disconnect runs

        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        except Exception:  # noqa: BLE001 - stopping anyway
            log.debug("closing the WebSocket server failed", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        loop.close()

    # ------------------------------------------------------------------ events
    def _event(self, route: str, kind: str, connection_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "requestContext": {
                "routeKey": route,
                "eventType": kind,
                "connectionId": connection_id,
                "domainName": self.host,
                "stage": "$default",
                "apiId": "local",
            },
            "isBase64Encoded": False,
            **extra,
        }

    async def _invoke(self, route: str, event: dict[str, Any]) -> Any:
        invoke = self._routes.get(route)
        if invoke is None:
            return None
        return await asyncio.to_thread(invoke, route, event)

    async def _connect(self, connection: ServerConnection, request: Request) -> Response | None:
        connection_id = base64.b64encode(secrets.token_bytes(12)).decode()
        headers = {name.lower(): value for name, value in request.headers.raw_items()}
        event = self._event("$connect", "CONNECT", connection_id, headers=headers)
        try:
            result = await self._invoke("$connect", event)
        except Exception:  # the function failed: API Gateway answers 500
            log.exception("$connect failed")
            return _response(500, '{"message": "Internal server error"}')
        status = int((result or {}).get("statusCode", 200))
        if status != 200:
            return _response(status, str((result or {}).get("body", "")))
        self._ids[id(connection)] = connection_id
        return None

    async def _serve(self, connection: ServerConnection) -> None:
        connection_id = self._ids.pop(id(connection))
        self._open[connection_id] = connection
        self._opened_at[connection_id] = time.monotonic()
        self.connections_opened += 1
        try:
            async for frame in connection:
                self.frames_in += 1
                text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
                route = _route_of(text, self._routes)
                event = self._event(route, "MESSAGE", connection_id, body=text)
                try:
                    result = await self._invoke(route, event)
                except Exception:  # as API Gateway: an error frame, the connection stays
                    log.exception("%s failed", route)
                    result = {"body": '{"message": "Internal server error"}'}
                body = (result or {}).get("body") if isinstance(result, dict) else None
                if body:
                    self.frames_out += 1
                    await connection.send(body)
        except ConnectionClosed:
            pass
        finally:
            self._open.pop(connection_id, None)
            self._closed_seconds += time.monotonic() - self._opened_at.pop(connection_id)
            if not self._stopping:
                await self._disconnect(connection_id)

    async def _disconnect(self, connection_id: str) -> None:
        event = self._event("$disconnect", "DISCONNECT", connection_id)
        try:
            await self._invoke("$disconnect", event)
        except Exception:  # noqa: BLE001 - best effort, as on AWS
            log.exception("$disconnect failed")

    # --------------------------------------------------------- management API
    def post(self, connection_id: str, data: bytes) -> bool:
        """Send ``data`` to the connection as one frame; False if it is not open."""
        connection, loop = self._open.get(connection_id), self._loop
        if connection is None or loop is None:
            return False
        text = data.decode("utf-8", "replace")
        self.frames_out += 1
        try:
            asyncio.run_coroutine_threadsafe(connection.send(text), loop).result(10)
        except Exception:  # noqa: BLE001 - closed meanwhile
            return False
        return True

    def close_connection(self, connection_id: str) -> bool:
        """Close the connection (``DeleteConnection``); False if it is not open. The close
        is under way when this returns: a client slow to answer the closing handshake is
        dropped by the library's close timeout, as API Gateway drops it."""
        connection, loop = self._open.get(connection_id), self._loop
        if connection is None or loop is None:
            return False
        closing = asyncio.run_coroutine_threadsafe(connection.close(), loop)
        try:
            closing.result(10)
        except Exception:  # noqa: BLE001 - the handshake did not finish: it closes anyway
            log.debug("closing connection %s did not finish", connection_id, exc_info=True)
        return True


def _route_of(text: str, routes: Mapping[str, Any]) -> str:
    """``$request.body.action`` if it names a route, else ``$default``."""
    try:
        action = json.loads(text).get("action")
    except (ValueError, AttributeError, RecursionError):
        action = None
    return action if isinstance(action, str) and action in routes else "$default"


def _response(status: int, body: str) -> Response:
    from http import HTTPStatus

    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    headers = Headers([("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return Response(status, reason, headers, body.encode())


def _callback_handler(gateway: WebSocketGateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _connection_id(self) -> str | None:
            marker = "/@connections/"
            if marker not in self.path:
                return None
            return unquote(self.path.split(marker, 1)[1].split("?", 1)[0])

        def _answer(self, status: int, error: str | None = None) -> None:
            body = json.dumps({"message": error} if error else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if error:
                self.send_header("x-amzn-ErrorType", error)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            connection_id = self._connection_id()
            if connection_id is None:
                self._answer(404, "NotFoundException")
            elif gateway.post(connection_id, data):
                self._answer(200)
            else:
                self._answer(410, "GoneException")

        def do_DELETE(self) -> None:  # noqa: N802
            connection_id = self._connection_id()
            if connection_id is not None and gateway.close_connection(connection_id):
                self._answer(204)
            else:
                self._answer(410, "GoneException")

    return Handler
