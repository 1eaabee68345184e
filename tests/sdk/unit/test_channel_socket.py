"""NotificationChannel against fake sockets: a connection the service drops at once is a
failure (the channel backs off, it does not reconnect on every registration), and a socket
that stopped answering (half-open, no error) is noticed and replaced. No timings asserted:
waits are bounded, what is asserted is what happened."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cirrusmq.consumer import channel as channel_module
from cirrusmq.consumer.channel import NotificationChannel


def eventually(predicate: Callable[[], bool], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class DroppedAtOnce:
    """The service accepts the upgrade, then closes before answering anything."""

    def send(self, text: str) -> None:
        pass

    def recv(self, timeout: float | None = None) -> str:
        raise ConnectionError("closed by the service")

    def close(self) -> None:
        pass


class ScriptedSocket:
    """A socket whose replies the test queues in ``_replies``; a recv waits for one."""

    def __init__(self) -> None:
        self._replies: list[str] = []
        self._lock = threading.Lock()
        self.closed = False

    def recv(self, timeout: float | None = None) -> str:
        deadline = time.monotonic() + (timeout or 0)
        while time.monotonic() < deadline and not self.closed:
            with self._lock:
                if self._replies:
                    return self._replies.pop(0)
            time.sleep(0.01)
        if self.closed:
            raise ConnectionError("closed")
        raise TimeoutError

    def close(self) -> None:
        self.closed = True


class GoesSilent(ScriptedSocket):
    """Answers the first registration, then nothing arrives any more and sends raise no
    error: a half-open TCP connection."""

    def __init__(self) -> None:
        super().__init__()
        self._answered = False
        self.sent = 0

    def send(self, text: str) -> None:
        frame = json.loads(text)
        with self._lock:
            self.sent += 1
            if not self._answered:
                self._answered = True
                reply = {"type": "waiting", "group": frame["group"], "topics": frame["topics"]}
                self._replies.append(json.dumps(reply))


def make_channel(monkeypatch: pytest.MonkeyPatch, socket: Callable[[], Any]) -> NotificationChannel:
    channel = NotificationChannel("ws://fake", credentials=None)
    monkeypatch.setattr(channel, "_connect", socket)
    return channel


def test_a_connection_dropped_at_once_backs_off_instead_of_reconnecting(monkeypatch) -> None:
    channel = make_channel(monkeypatch, DroppedAtOnce)
    try:
        event = threading.Event()
        waiter = channel.waiter("g", ["t"], event)
        # an idle consumer registers again each time it is woken: a service that drops every
        # socket at once must not be connected to again for each of these registrations
        results = [waiter.register() for _ in range(20)]
        assert not any(results)
        assert not channel.healthy
        assert channel.connects <= 2
    finally:
        channel.close()


def test_a_half_open_socket_is_noticed_and_its_waiters_poll(monkeypatch) -> None:
    monkeypatch.setattr(channel_module, "KEEPALIVE_S", 0.2)
    sockets: list[GoesSilent] = []

    def open_socket() -> GoesSilent:
        sockets.append(GoesSilent())
        return sockets[-1]

    channel = make_channel(monkeypatch, open_socket)
    try:
        event = threading.Event()
        waiter = channel.waiter("g", ["t"], event)
        assert waiter.register()
        # the keepalive's registrations get no reply: the socket is dead, the waiter is woken
        assert eventually(event.is_set)
        assert sockets[0].closed
        assert not waiter.registered
    finally:
        channel.close()


class AnswersOutOfOrder(ScriptedSocket):
    """Holds its replies until two waits arrived, then answers the refused group's first:
    an error frame for group ``denied``, ``waiting`` for the other, as the service does
    (an error frame names the registration it refuses)."""

    def __init__(self) -> None:
        super().__init__()
        self._waits: list[dict[str, Any]] = []

    def send(self, text: str) -> None:
        with self._lock:
            self._waits.append(json.loads(text))
            if len(self._waits) == 2:
                for wait in sorted(self._waits, key=lambda w: w["group"] != "denied"):
                    names = {"group": wait["group"], "topics": sorted(wait["topics"])}
                    if wait["group"] == "denied":
                        reply = {"type": "error", "code": "AccessDenied", "message": "no", **names}
                    else:
                        reply = {"type": "waiting", **names}
                    self._replies.append(json.dumps(reply))


def test_a_refused_registration_does_not_refuse_another_consumers(monkeypatch) -> None:
    socket = AnswersOutOfOrder()
    channel = make_channel(monkeypatch, lambda: socket)
    try:
        allowed = channel.waiter("allowed", ["t"], threading.Event())
        denied = channel.waiter("denied", ["t"], threading.Event())
        results: dict[str, bool] = {}
        threads = [
            threading.Thread(target=lambda w=w: results.__setitem__(w.group, w.register()))
            for w in (allowed, denied)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert results == {"allowed": True, "denied": False}
        assert (allowed.refused, denied.refused) == (None, "AccessDenied")
    finally:
        channel.close()
