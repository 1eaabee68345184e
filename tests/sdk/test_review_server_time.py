"""Adversarial review: the SDK adopts the ``server_time`` of a ``RequestExpired`` answer.

The answer is not authenticated (any endpoint, proxy or MITM can send it), and the offset it
sets is unbounded: a hostile endpoint makes the SDK sign its very next request (the transport
re-sends at once) with a date of its choosing, say 30 days ahead. That request, never seen by
the real service, has no recorded nonce and becomes valid there in 30 days: a captured
``POST /v1/keys`` signed by an admin key mints an admin key whenever the attacker likes —
instead of within the 300 s a captured request normally lives.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import httpx
import pytest
from cirrusmq.transport import RetryPolicy, Transport

from .signature_check import FAKE_CREDENTIALS

FAST = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=2)
AHEAD_S = 30 * 24 * 3600


def _hostile_endpoint(captured: list[httpx.Request]):
    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        if len(captured) == 1:  # unsigned, unauthenticated "RequestExpired"
            server_ms = int((time.time() + AHEAD_S) * 1000)
            return httpx.Response(
                401,
                json={
                    "code": "RequestExpired",
                    "message": "sign again",
                    "details": {"server_time": server_ms},
                },
            )
        return httpx.Response(201, json={"access_key": "x", "secret_key": "y"})

    return handler


def _signed_at(request: httpx.Request) -> float:
    date = request.headers["X-Cirrus-Date"]
    return datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()


@pytest.mark.xfail(
    strict=True,
    reason="the SDK adopts any server_time from an unauthenticated RequestExpired, unbounded: "
    "a hostile endpoint obtains requests signed 30 days ahead, replayable at the real service "
    "then (no nonce recorded)",
)
def test_a_hostile_request_expired_cannot_make_the_sdk_sign_far_future_requests():
    captured: list[httpx.Request] = []
    t = Transport(
        "http://cirrus.test",
        FAKE_CREDENTIALS,
        retry=FAST,
        http_transport=httpx.MockTransport(_hostile_endpoint(captured)),
    )
    try:
        t.request(
            "POST", "/v1/keys", json_body={"permissions": {"admin": True}, "description": "x"}
        )
    except Exception:  # noqa: BLE001 - refusing the request is an acceptable outcome
        pass
    future = [r for r in captured if _signed_at(r) > time.time() + 24 * 3600]
    assert future == [], (
        f"the SDK signed {len(future)} request(s) dated "
        f"{[r.headers['X-Cirrus-Date'] for r in future]} for a hostile endpoint"
    )
