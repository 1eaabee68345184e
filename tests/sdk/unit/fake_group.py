"""An in-process stand-in for the consume API (``httpx.MockTransport``), for unit tests.

Receives long-poll (they wait up to ``wait_seconds`` for messages to be ``add``-ed; each
``wait_seconds`` is recorded); a group's first receive of a topic records its filter and a
receive with another one is refused (409 ``SubscriptionConflict``). Acks answer one result per
handle (``bad-…`` invalid, ``foreign-…`` foreign, ``stale-…`` expired), also those a receive
carries (``ack``: acked first, results in ``acks``); with ``legacy_acks`` they answer the
former way: all or nothing, 400 for malformed (not named), foreign or stale (named in
``details``) handles, and a receive carrying acks is refused (400, an unknown field). A
receive of more than 1,000 messages is refused (400 InvalidRequest) before its acks; an ack
(riding or not) spanning more than 100 queues is refused as a whole (400 InvalidRequest,
``details.max_queues``), as the service does.
Change-invisible calls are recorded. An empty receive answers ``next_due`` as its
``next_due_ms`` (when something not receivable yet is due, as the service tells; None: left out).
Every request's signature is checked as the service does (sign with ``FAKE_CREDENTIALS``).
With ``down`` set, every connection is refused (the service is unreachable).
"""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx

from .signature_check import FAKE_CREDENTIALS, SignatureChecker

MAX_ACK_QUEUES = 100
"""Queues one ack may span (a handle ``q<N>-…`` is of queue N, any other of queue 0)."""


class FakeGroupService:
    def __init__(self) -> None:
        self.credentials = FAKE_CREDENTIALS
        self.signatures = SignatureChecker(self.credentials)
        self.cond = threading.Condition()
        self.available: list[dict] = []
        self.acked: list[str] = []
        self.invisible: list[tuple[str, int]] = []
        self.receives = 0
        self.malformed_receives = 0
        """The next receives answer 200 with a body that is not a receive response."""
        self.crash_acks = 0
        """The next acks raise a ValueError (not an HTTP error: a bug, say)."""
        self.legacy_acks = False
        """Answer acks the former way (all or nothing), as a service before per-handle results."""
        self.waits: list[float] = []
        """The ``wait_seconds`` of every receive."""
        self.subscriptions: dict[str, str] = {}
        self.ack_requests = 0
        self.riding_acks: list[str] = []
        """Handles receives carried (acked by the receive)."""
        self.fail_receives = 0
        """The next receives answer 503 Busy (retriable)."""
        self.down = False
        """Refuse every connection (the service is unreachable)."""
        self.receive_gate: threading.Event | None = None
        """When set to an event, receives after the first ``receives_before_gate`` wait
        for it before answering."""
        self.receives_before_gate = 0
        self._receive_calls = 0
        self.ride_gate: threading.Event | None = None
        """When set to an event, receives carrying acks wait for it before answering
        (``riding_held`` counts them)."""
        self.riding_held = 0
        self.next_due: object = None
        """``next_due_ms`` of an empty receive's answer (None: not in the answer)."""
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
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        refusal = self.signatures.check(request)
        if refusal is not None:
            return refusal
        body = json.loads(request.content)
        action = request.url.path.rsplit("/", 1)[-1]
        if action == "receive":
            return self._receive(body)
        if action == "ack":
            with self.cond:
                self.ack_requests += 1
            if self.legacy_acks:
                return self._legacy_ack(body["receipt_handles"])
            return self._ack(body["receipt_handles"])
        if action == "invisible":
            with self.cond:
                self.invisible.append((body["receipt_handle"], body["invisible_seconds"]))
            return httpx.Response(
                200, json={"receipt_handle": body["receipt_handle"] + "+", "invisible_until": 2}
            )
        return httpx.Response(404, json={"code": "RouteNotFound", "message": "no"})

    def _receive(self, body: dict) -> httpx.Response:
        with self.cond:
            self._receive_calls += 1
            held = self._receive_calls > self.receives_before_gate
        if self.receive_gate is not None and held:
            self.receive_gate.wait(10)
        if self.ride_gate is not None and "ack" in body:
            with self.cond:
                self.riding_held += 1
            self.ride_gate.wait(10)
        deadline = time.monotonic() + body["wait_seconds"]
        if not 1 <= body["max_messages"] <= 1000:  # refused before its acks, as the service does
            return httpx.Response(
                400, json={"code": "InvalidRequest", "message": "max_messages must be 1-1000"}
            )
        with self.cond:
            if self.fail_receives:
                self.fail_receives -= 1
                return httpx.Response(503, json={"code": "Busy", "message": "injected"})
        acks = None
        if "ack" in body:
            if self.legacy_acks:
                return httpx.Response(
                    400, json={"code": "InvalidRequest", "message": "ack: extra inputs"}
                )
            answer = self._ack(body["ack"])
            if answer.status_code != 200:  # refused as a whole: the receive too
                return answer
            acks = answer.json()
            with self.cond:
                self.riding_acks += body["ack"]
        with self.cond:
            self.receives += 1
            self.waits.append(body["wait_seconds"])
            recorded = self.subscriptions.setdefault(body["topic"], body["filter"])
            if recorded != body["filter"]:
                return httpx.Response(
                    409,
                    json={
                        "code": "SubscriptionConflict",
                        "message": "the group is subscribed with another filter",
                        "details": {
                            "topic": body["topic"],
                            "subscribed": recorded,
                            "requested": body["filter"],
                        },
                    },
                )
            if self.malformed_receives:
                self.malformed_receives -= 1
                return httpx.Response(200, json={"unexpected": True})
            while not self.available and (remaining := deadline - time.monotonic()) > 0:
                self.cond.wait(remaining)
            taken = self.available[: body["max_messages"]]
            del self.available[: len(taken)]
        answer = {"messages": taken} if acks is None else {"messages": taken, "acks": acks}
        if not taken and self.next_due is not None:
            answer["next_due_ms"] = self.next_due
        return httpx.Response(200, json=answer)

    def _crash(self) -> None:
        with self.cond:
            if self.crash_acks:
                self.crash_acks -= 1
                raise ValueError("injected: not an HTTP error")

    def _ack(self, handles: list[str]) -> httpx.Response:
        self._crash()
        queues = {h.split("-", 1)[0] for h in handles if h.startswith("q")}
        if len(queues) > MAX_ACK_QUEUES:
            return httpx.Response(
                400,
                json={
                    "code": "InvalidRequest",
                    "message": f"one ack spans at most {MAX_ACK_QUEUES} queues",
                    "details": {"max_queues": MAX_ACK_QUEUES},
                },
            )
        results = []
        with self.cond:
            for h in handles:
                if h.startswith(("bad", "foreign", "stale")):
                    status, code = {
                        "bad": ("invalid", "InvalidReceiptHandle"),
                        "foreign": ("invalid", "ForeignReceiptHandle"),
                        "stale": ("expired", "ReceiptHandleExpired"),
                    }[next(p for p in ("bad", "foreign", "stale") if h.startswith(p))]
                    results.append(
                        {"receipt_handle": h, "status": status, "code": code, "message": "no"}
                    )
                    continue
                if h not in self.acked:
                    self.acked.append(h)
                results.append({"receipt_handle": h, "status": "acked", "code": None})
        acked = sum(r["status"] == "acked" for r in results)
        return httpx.Response(200, json={"acked": acked, "results": results})

    def _legacy_ack(self, handles: list[str]) -> httpx.Response:
        self._crash()
        stale = [h for h in handles if h.startswith("stale")]
        if stale:
            return httpx.Response(
                400,
                json={
                    "code": "ReceiptHandleExpired",
                    "message": "stale",
                    "details": {"receipt_handles": stale},
                },
            )
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
