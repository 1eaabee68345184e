"""An in-process stand-in for the produce API (``httpx.MockTransport``), for unit tests.

It keeps the service's idempotency rule (producer id + sequence → the original receipts,
``duplicate: true``), checks every request's signature as the service does (sign with
``FAKE_CREDENTIALS``; ``signatures`` records nonces and refusals), and can be taken down
(connection refused) or made to fail.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict

import httpx

from .signature_check import FAKE_CREDENTIALS, SignatureChecker

__all__ = ["FAKE_CREDENTIALS", "FakeService"]


class FakeService:
    def __init__(self) -> None:
        self.credentials = FAKE_CREDENTIALS
        """What the requests must be signed with."""
        self.signatures = SignatureChecker(self.credentials)
        self.down = False
        self.hold = threading.Event()
        """Requests wait for this event (set: they go through at once)."""
        self.hold.set()
        self.fail_next: list[tuple[int, str]] = []
        """(status, code) answers for the next requests."""
        self.crash_next = 0
        """The next requests raise a ValueError (not an HTTP error: a bug, say)."""
        self.missing_topics: set[str] = set()
        """Topics answered with 404 ``TopicNotFound`` (as after a local stack restart)."""
        self.arrived = 0
        """Requests that reached the handler (also those held or failed)."""
        self.requests: list[dict] = []
        self.stored: dict[str, list[dict]] = defaultdict(list)
        self._seen: dict[tuple[str, int], dict] = {}
        self._lock = threading.Lock()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.arrived += 1
        self.hold.wait(10)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        refusal = self.signatures.check(request)
        if refusal is not None:
            return refusal
        with self._lock:
            if self.crash_next:
                self.crash_next -= 1
                raise ValueError("injected: not an HTTP error")
            if self.fail_next:
                status, code = self.fail_next.pop(0)
                return httpx.Response(status, json={"code": code, "message": "injected"})
            parts = request.url.path.split("/")
            if request.method != "POST" or parts[-1] != "messages":
                return httpx.Response(404, json={"code": "RouteNotFound", "message": "no"})
            topic = parts[-2]
            if topic in self.missing_topics:
                return httpx.Response(404, json={"code": "TopicNotFound", "message": topic})
            body = json.loads(request.content)
            self.requests.append(body)
            key = (body["producer_id"], body["sequence"])
            if key in self._seen:
                return httpx.Response(200, json={**self._seen[key], "duplicate": True})
            receipts = []
            for message in body["messages"]:
                offset = len(self.stored[topic])
                self.stored[topic].append(message)
                receipts.append({"message_id": message["message_id"], "queue": 0, "offset": offset})
            answer = {"receipts": receipts, "duplicate": False}
            self._seen[key] = answer
            return httpx.Response(200, json=answer)

    def bodies(self, topic: str) -> list[str]:
        import base64

        return [base64.b64decode(m["body"]).decode() for m in self.stored[topic]]
