"""An in-process stand-in for the consume API (``httpx.MockTransport``), for unit tests.

Receives long-poll (they wait up to ``wait_seconds`` for messages to be ``add``-ed); acks are
recorded, and refused like the service does for malformed (``bad-…``, not named) or foreign
(``foreign-…``, named in ``details``) receipt handles; change-invisible calls are recorded.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx


class FakeGroupService:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.available: list[dict] = []
        self.acked: list[str] = []
        self.invisible: list[tuple[str, int]] = []
        self.receives = 0
        self.malformed_receives = 0
        """The next receives answer 200 with a body that is not a receive response."""
        self.crash_acks = 0
        """The next acks raise a ValueError (not an HTTP error: a bug, say)."""
        self._offset = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def add(self, *handles: str, topic: str = "t") -> None:
        """Make messages available, one per receipt handle."""
        with self.cond:
            for handle in handles:
                self.available.append(
                    {
                        "message_id": f"id-{handle}",
                        "topic": topic,
                        "body": base64.b64encode(handle.encode()).decode(),
                        "queue": 0,
                        "offset": self._offset,
                        "born_timestamp": 1,
                        "stored_timestamp": 1,
                        "receipt_handle": handle,
                        "delivery_attempt": 1,
                        "invisible_until": int(time.time() * 1000) + 60_000,
                    }
                )
                self._offset += 1
            self.cond.notify_all()

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        action = request.url.path.rsplit("/", 1)[-1]
        if action == "receive":
            return self._receive(body)
        if action == "ack":
            return self._ack(body["receipt_handles"])
        if action == "invisible":
            with self.cond:
                self.invisible.append((body["receipt_handle"], body["invisible_seconds"]))
            return httpx.Response(
                200, json={"receipt_handle": body["receipt_handle"] + "+", "invisible_until": 2}
            )
        return httpx.Response(404, json={"code": "RouteNotFound", "message": "no"})

    def _receive(self, body: dict) -> httpx.Response:
        deadline = time.monotonic() + body["wait_seconds"]
        with self.cond:
            self.receives += 1
            if self.malformed_receives:
                self.malformed_receives -= 1
                return httpx.Response(200, json={"unexpected": True})
            while not self.available and (remaining := deadline - time.monotonic()) > 0:
                self.cond.wait(remaining)
            taken = self.available[: body["max_messages"]]
            del self.available[: len(taken)]
        return httpx.Response(200, json={"messages": taken})

    def _ack(self, handles: list[str]) -> httpx.Response:
        with self.cond:
            if self.crash_acks:
                self.crash_acks -= 1
                raise ValueError("injected: not an HTTP error")
        if any(h.startswith("bad") for h in handles):
            return httpx.Response(
                400, json={"code": "InvalidReceiptHandle", "message": "malformed receipt handle"}
            )
        foreign = [h for h in handles if h.startswith("foreign")]
        if foreign:
            return httpx.Response(
                400,
                json={
                    "code": "ForeignReceiptHandle",
                    "message": "receipt handle(s) of another group",
                    "details": {"receipt_handles": foreign},
                },
            )
        with self.cond:
            self.acked += handles
        return httpx.Response(200, json={"acked": len(handles)})
