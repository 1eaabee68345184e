"""Error mapping and the retry policy, against a mock HTTP transport."""

from __future__ import annotations

import httpx
import pytest
from cirrusmq import (
    AccessDeniedError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    MQError,
    NotFoundError,
    ReceiptHandleExpiredError,
    RetryPolicy,
    ServerError,
    ThrottledError,
    TransportError,
    UnauthorizedError,
)
from cirrusmq.errors import error_from_response
from cirrusmq.transport import Transport

FAST = RetryPolicy(max_attempts=3, initial_backoff_ms=1, max_backoff_ms=2)


@pytest.mark.parametrize(
    ("status", "code", "cls", "retriable"),
    [
        (400, "InvalidRequest", BadRequestError, False),
        (400, "ReceiptHandleExpired", ReceiptHandleExpiredError, False),
        (401, "Unauthorized", AuthenticationError, False),
        (401, "MissingSignature", AuthenticationError, False),
        (401, "InvalidSignature", AuthenticationError, False),
        (401, "ReplayedRequest", AuthenticationError, False),
        (403, "AccessDenied", AccessDeniedError, False),
        (404, "TopicNotFound", NotFoundError, False),
        (405, "MethodNotAllowed", BadRequestError, False),
        (409, "TopicAlreadyExists", ConflictError, False),
        (429, "Throttled", ThrottledError, True),
        (500, "InternalError", ServerError, True),
        (503, "Busy", ServerError, True),
    ],
)
def test_responses_map_to_typed_errors(status, code, cls, retriable):
    error = error_from_response(
        status, {"code": code, "message": "m", "details": {"receipt_handles": ["h"]}}
    )
    assert type(error) is cls
    assert isinstance(error, MQError)
    assert (error.code, error.http_status, error.retriable) == (code, status, retriable)
    assert str(error) == f"[{code}] m"
    if status == 401:
        assert isinstance(error, UnauthorizedError)  # the former class still catches it


def test_stale_handles_are_listed():
    error = error_from_response(
        400,
        {
            "code": "ReceiptHandleExpired",
            "message": "m",
            "details": {"receipt_handles": ["a", "b"]},
        },
    )
    assert error.receipt_handles == ["a", "b"]


def test_a_non_json_error_body_still_maps_by_status():
    error = error_from_response(502, None)
    assert isinstance(error, ServerError) and error.code is None and error.http_status == 502


def test_backoff_grows_with_jitter_and_is_capped():
    policy = RetryPolicy(initial_backoff_ms=100, max_backoff_ms=1000)
    for retry, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (10, 1.0)]:
        delays = [policy.backoff_s(retry) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def _transport(handler) -> Transport:
    return Transport("http://cirrus.test", retry=FAST, http_transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    "failure",
    [
        lambda r: httpx.Response(503, json={"code": "Busy", "message": "b"}),
        lambda r: httpx.Response(429, json={"code": "Throttled", "message": "t"}),
        lambda r: httpx.Response(500, text="oops"),
    ],
)
def test_retriable_failures_are_retried_with_the_same_body(failure):
    seen = []

    def handler(request):
        seen.append(request.content)
        return failure(request) if len(seen) < 3 else httpx.Response(200, json={"ok": 1})

    assert _transport(handler).request("POST", "/x", json_body={"a": 1}) == {"ok": 1}
    assert len(seen) == 3 and len(set(seen)) == 1


def test_transport_errors_are_retried_then_raised():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TransportError) as caught:
        _transport(handler).request("GET", "/x")
    assert len(calls) == 3 and caught.value.retriable and caught.value.http_status is None


def test_client_errors_are_not_retried():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(404, json={"code": "TopicNotFound", "message": "no topic"})

    with pytest.raises(NotFoundError, match="TopicNotFound"):
        _transport(handler).request("GET", "/x")
    assert calls == [1]


def test_non_idempotent_calls_retry_only_what_surely_did_nothing():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(TransportError):
        _transport(handler).request("POST", "/v1/topics", json_body={}, idempotent=False)
    assert calls == [1]


def test_no_content_is_none():
    assert _transport(lambda r: httpx.Response(204)).request("DELETE", "/x") is None
