"""Every SDK call carries an X-Cirrus-Correlation-Id: new per call, the same on its retries,
the caller's when given; a failed call's error carries it."""

from __future__ import annotations

import logging

import httpx
import pytest
from cirrusmq.errors import NotFoundError, ServerError
from cirrusmq.transport import CORRELATION_HEADER, RetryPolicy, Transport

QUICK = RetryPolicy(max_attempts=3, initial_backoff_ms=1, max_backoff_ms=1)


def transport(answers: list[httpx.Response]) -> tuple[Transport, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers[CORRELATION_HEADER])
        return answers.pop(0) if answers else httpx.Response(200, json={})

    return Transport("http://svc", http_transport=httpx.MockTransport(handle), retry=QUICK), seen


def busy() -> httpx.Response:
    return httpx.Response(503, json={"code": "Busy", "message": "retry"})


def test_each_call_sends_a_new_id_kept_across_its_retries():
    client, seen = transport([busy(), busy()])
    try:
        client.request("GET", "/v1/topics")  # two 503s, then 200
        client.request("GET", "/v1/topics")
    finally:
        client.close()
    assert len(seen) == 4
    assert seen[0] == seen[1] == seen[2] != seen[3]
    assert all(len(i) == 32 for i in seen)


def test_the_callers_id_is_sent():
    client, seen = transport([])
    try:
        client.request("GET", "/v1/topics", correlation_id="order-42")
    finally:
        client.close()
    assert seen == ["order-42"]


def test_a_failed_call_carries_and_logs_its_id(caplog: pytest.LogCaptureFixture):
    missing = httpx.Response(404, json={"code": "TopicNotFound", "message": "no topic t"})
    client, seen = transport([missing])
    try:
        with (
            caplog.at_level(logging.DEBUG, "cirrusmq.transport"),
            pytest.raises(NotFoundError) as error,
        ):
            client.request("GET", "/v1/topics/t")
    finally:
        client.close()
    assert error.value.correlation_id == seen[0]
    assert seen[0] in caplog.text


def test_a_fault_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture):
    client, seen = transport([busy(), busy(), busy()])
    try:
        with caplog.at_level(logging.WARNING, "cirrusmq.transport"), pytest.raises(ServerError):
            client.request("GET", "/v1/topics")
    finally:
        client.close()
    [record] = caplog.records
    assert record.levelno == logging.WARNING and seen[0] in record.getMessage()
