"""The notification channel, client side: idle consumers wait on a WebSocket instead of
polling (docs/notifications.md).

One :class:`NotificationChannel` per (WebSocket URL, access key) per process, shared by every
consumer of the process: one connection, opened on first need with a signed upgrade request
(the SDK's signing scheme over ``GET /v1/notifications``). A consumer with nothing to do
registers its (group, topics) with a ``wait`` message and sleeps; the service posts
``look_now`` when one of those topics gets data, which wakes it, and it receives as usual. A
notified registration is gone on the service too: the consumer registers again when it is
idle again. Nothing but "look now" arrives over the socket, so a lost notification only costs
latency: an idle consumer still polls every :data:`SAFETY_POLL_S` seconds.

API Gateway closes a WebSocket idle for 10 minutes and any after 2 hours: the channel sends
its registrations again every :data:`KEEPALIVE_S` (which also refreshes them), closes a
socket nobody waits on, and reconnects before :data:`RECONNECT_AFTER_S`. When the socket
drops or cannot be opened, every waiter is woken to poll at once and falls back to the
adaptive polling until the channel is back (reconnect attempts back off up to a minute).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..signing import sign

__all__ = [
    "KEEPALIVE_S",
    "RECONNECT_AFTER_S",
    "SAFETY_POLL_S",
    "NotificationChannel",
    "Waiter",
    "channel_for",
]

log = logging.getLogger("cirrusmq.channel")

CONNECT_PATH = "/v1/notifications"
"""What the upgrade request's signature covers (method GET, empty body)."""
SAFETY_POLL_S = 540.0
"""The longest an idle consumer on the channel goes without a receive (9 minutes)."""
KEEPALIVE_S = 540.0
"""Registrations are sent again this often: under API Gateway's 10-minute idle close."""
RECONNECT_AFTER_S = 6600.0
"""A connection is replaced after 110 minutes: before API Gateway's 2-hour limit."""
CONFIRM_TIMEOUT_S = 5.0
MAX_BACKOFF_S = 60.0


@dataclass(eq=False)
class Waiter:
    """One consumer's registration: ``event`` is set when one of ``topics`` has data for
    ``group`` (or the channel dropped: poll now)."""

    channel: NotificationChannel
    group: str
    topics: tuple[str, ...]
    event: threading.Event
    registered: bool = False
    """The service holds the registration (confirmed, not notified since)."""
    refused: str | None = None
    """The service refused the registration (e.g. AccessDenied): this waiter polls."""
    _confirmed: threading.Event = field(default_factory=threading.Event)

    def register(self) -> bool:
        """Ask the service to notify this waiter; True once confirmed."""
        if self.refused is not None:
            return False
        return self.channel._register(self)

    def close(self) -> None:
        self.channel._forget(self)


class NotificationChannel:
    """One shared WebSocket to the notification channel (thread-safe)."""

    def __init__(self, url: str, credentials: Any, *, clock_offset_s: Any = None) -> None:
        self.url = url
        self._credentials = credentials
        self._clock_offset_s = clock_offset_s or (lambda: 0.0)
        self._lock = threading.Lock()
        self._waiters: set[Waiter] = set()
        self._wanted: set[Waiter] = set()
        self._socket: Any = None
        self._demand = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0
        self.connects = 0
        """Connections opened (tests and benchmarks read it)."""
        self.notifications = 0
        """``look_now`` frames received."""

    @property
    def healthy(self) -> bool:
        """The last attempt to connect did not fail."""
        return self._failures == 0

    @property
    def available(self) -> bool:
        """A socket is open now."""
        return self._socket is not None

    def waiter(
        self, group: str, topics: list[str] | tuple[str, ...], event: threading.Event
    ) -> Waiter:
        waiter = Waiter(self, group, tuple(sorted(set(topics))), event)
        with self._lock:
            self._waiters.add(waiter)
        return waiter

    # ------------------------------------------------------------- registration
    def _register(self, waiter: Waiter) -> bool:
        waiter._confirmed.clear()
        with self._lock:
            self._wanted.add(waiter)
            socket = self._socket
            self._ensure_thread()
        self._demand.set()
        if socket is not None:
            self._send_wait(socket, waiter)
        elif not self._connected_soon():
            return False
        if not waiter._confirmed.wait(CONFIRM_TIMEOUT_S):
            return False
        return waiter.registered

    def _connected_soon(self) -> bool:
        deadline = time.monotonic() + CONFIRM_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._socket is not None:
                return True
            if self._failures:
                return False
            time.sleep(0.02)
        return False

    def _forget(self, waiter: Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)
            self._wanted.discard(waiter)

    def _send_wait(self, socket: Any, waiter: Waiter) -> None:
        frame = {"action": "wait", "group": waiter.group, "topics": list(waiter.topics)}
        try:
            socket.send(json.dumps(frame))
        except Exception:  # noqa: BLE001 - the reader sees the close and wakes everyone
            log.debug("sending a wait failed", exc_info=True)

    # ------------------------------------------------------------------ the socket
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="cirrusmq-notifications", daemon=True
            )
            self._thread.start()

    def _connect(self) -> Any:
        from websockets.sync.client import connect

        now = time.time() + self._clock_offset_s()
        headers = sign("GET", "http://channel" + CONNECT_PATH, b"", self._credentials, now=now)
        return connect(
            self.url,
            additional_headers=headers,
            open_timeout=10,
            ping_interval=None,  # API Gateway's idle timer: the keepalive sends registrations
            close_timeout=2,
        )

    def _run(self) -> None:
        while True:
            self._demand.wait()
            try:
                socket = self._connect()
            except Exception as error:  # noqa: BLE001 - refused, unreachable: poll meanwhile
                self._failures += 1
                delay = self._backoff_s()
                log.info(
                    "notification channel unavailable (%s); polling, retry in %.0f s", error, delay
                )
                self._wake_all()
                with self._lock:
                    if not self._wanted:
                        self._demand.clear()  # the next registration asks again
                time.sleep(delay)
                continue
            self.connects += 1
            with self._lock:
                self._socket = socket
                wanted = list(self._wanted)
            for waiter in wanted:
                self._send_wait(socket, waiter)
            answered = self._read(socket)
            with self._lock:
                self._socket = None
            self._wake_all()  # registrations may be lost: every waiter polls once
            with self._lock:
                if not self._wanted:
                    self._demand.clear()  # the woken waiters' next registrations ask again
            if answered:
                self._failures = 0
                continue
            # dropped before the service answered anything: a failure like a refused
            # connect, so a service that closes every socket at once is not reconnected to
            # on each registration (the waiters poll meanwhile)
            self._failures += 1
            time.sleep(self._backoff_s())

    def _backoff_s(self) -> float:
        """The wait before the next connect: doubles per failure up to
        :data:`MAX_BACKOFF_S`, with jitter so that processes dropped together (a deploy)
        do not come back together."""
        return min(MAX_BACKOFF_S, 0.5 * 2**self._failures) * random.uniform(0.5, 1.0)

    def _read(self, socket: Any) -> bool:
        """Read frames until the socket closes, must be replaced, or stops answering;
        True if the service sent anything. Every keepalive's registrations are answered
        (``waiting`` or an error): none within :data:`CONFIRM_TIMEOUT_S` means the socket is
        dead though no error says so (half-open), and it is replaced."""
        opened = last_sent = time.monotonic()
        answered = False
        reply_due: float | None = None
        while True:
            now = time.monotonic()
            if now - opened >= RECONNECT_AFTER_S:
                break
            if reply_due is not None and now >= reply_due:
                log.info("notification channel: no answer to the keepalive; reconnecting")
                break
            if now - last_sent >= KEEPALIVE_S:
                with self._lock:
                    wanted = list(self._wanted)
                if not wanted:
                    break  # nobody waits: close instead of keeping the socket alive
                for waiter in wanted:
                    self._send_wait(socket, waiter)
                last_sent = now
                if reply_due is None:
                    reply_due = now + CONFIRM_TIMEOUT_S
            limits = [KEEPALIVE_S - (now - last_sent), RECONNECT_AFTER_S - (now - opened)]
            if reply_due is not None:
                limits.append(reply_due - now)
            try:
                frame = socket.recv(timeout=max(0.1, min(limits)))
            except TimeoutError:
                continue
            except Exception:  # noqa: BLE001 - closed by the service, the network, us
                break
            answered = True
            reply_due = None
            self._on_frame(frame)
        with contextlib.suppress(Exception):
            socket.close()
        return answered

    def _on_frame(self, frame: str | bytes) -> None:
        try:
            body = json.loads(frame)
        except ValueError:
            return
        kind = body.get("type") if isinstance(body, dict) else None
        if kind == "look_now":
            self.notifications += 1
            for wait in body.get("waits") or []:
                self._notify(str(wait.get("group")), set(wait.get("topics") or []))
        elif kind == "waiting":
            self._confirm(str(body.get("group")), tuple(sorted(body.get("topics") or [])), None)
        elif kind == "error":
            log.warning("notification channel refused a wait: %s", body.get("message"))
            named = isinstance(body.get("group"), str) and isinstance(body.get("topics"), list)
            which = (body["group"], tuple(sorted(map(str, body["topics"])))) if named else None
            self._refuse(str(body.get("code") or "error"), which)

    def _notify(self, group: str, topics: set[str]) -> None:
        with self._lock:
            woken = [w for w in self._wanted if w.group == group and topics & set(w.topics)]
            for waiter in woken:
                waiter.registered = False
                self._wanted.discard(waiter)
        for waiter in woken:
            waiter.event.set()

    def _confirm(self, group: str, topics: tuple[str, ...], _: Any) -> None:
        with self._lock:
            matched = [w for w in self._wanted if w.group == group and w.topics == topics]
        for waiter in matched:
            waiter.registered = True
            waiter._confirmed.set()

    def _refuse(self, code: str, which: tuple[str, tuple[str, ...]] | None) -> None:
        """Refuse the unconfirmed registration(s) of ``which`` (group, topics), the one
        the error frame names; a frame naming none refuses every unconfirmed one."""
        with self._lock:
            pending = [
                w
                for w in self._wanted
                if not w._confirmed.is_set() and (which is None or (w.group, w.topics) == which)
            ]
            for waiter in pending:
                self._wanted.discard(waiter)
        for waiter in pending:
            waiter.refused = code
            waiter._confirmed.set()

    def _wake_all(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
            for waiter in waiters:
                waiter.registered = False
                waiter._confirmed.set()
        for waiter in waiters:
            if waiter in self._wanted:
                waiter.event.set()
        with self._lock:
            self._wanted.clear()

    def close(self) -> None:
        with self._lock:
            self._wanted.clear()
            socket = self._socket
        self._demand.clear()
        if socket is not None:
            socket.close()


_channels: dict[tuple[str, str], NotificationChannel] = {}
_endpoints: dict[str, str | None] = {}
_lock = threading.Lock()


def channel_for(transport: Any) -> NotificationChannel | None:
    """The process's channel for ``transport``'s service and access key, or None: no
    credentials, the service states no ``ws_endpoint`` in ``/v1/health``, or it could not be
    asked (the consumer polls)."""
    credentials = getattr(transport, "credentials", None)
    endpoint = getattr(transport, "endpoint", None)
    if credentials is None or endpoint is None:
        return None
    with _lock:
        known = endpoint in _endpoints
        url = _endpoints.get(endpoint)
    if not known:
        try:
            url = (transport.request("GET", "/v1/health") or {}).get("ws_endpoint")
        except Exception:  # noqa: BLE001 - an older service, unreachable now: poll
            log.debug("no notification channel for %s", endpoint, exc_info=True)
            return None
        with _lock:
            _endpoints[endpoint] = url
    if not url:
        return None
    key = (url, credentials.access_key)
    with _lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = NotificationChannel(
                url, credentials, clock_offset_s=lambda: _offset(transport)
            )
        return channel


def _offset(transport: Any) -> float:
    auth = getattr(getattr(transport, "_client", None), "auth", None)
    return float(getattr(auth, "clock_offset_s", 0.0) or 0.0)
