"""One log line and one set of metrics per HTTP request, and the correlation id.

:func:`observe` wraps the resolution of one API Gateway event: it binds the log keys
(``request_id``, ``function_request_id``, ``route``, ``request_kind``, ``correlation_id``,
then ``access_key`` once the signature is checked — the key's id, never its secret), logs
``request`` with the status, error code and duration, emits the request kind's metrics
(:data:`REQUEST_METRICS`), echoes the correlation id in the ``X-Cirrus-Correlation-Id``
response header and adds ``X-Content-Type-Options: nosniff`` to every answer. The request
is one request of message trace (every protocol's: the native API, SQS, RocketMQ HTTP): the
events of traced topics it records are written as one object at its end. Routes report the
messages they handled with :func:`count_messages`.
"""

from __future__ import annotations

import contextvars
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cirrusmq_broker import telemetry
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.trace import request_scope
from cirrusmq_broker.telemetry import MetricUnit

from .heap import settle_after_request

NO_SNIFF = {"X-Content-Type-Options": "nosniff"}
"""On every answer of every protocol: a browser takes its body for its declared type only
(a JSON or XML answer echoing a caller's text is never run as a script or a page)."""
CORRELATION_HEADER = "X-Cirrus-Correlation-Id"
"""Sent by the SDK on every request (not signed: it only labels logs); echoed in the answer."""
_CORRELATION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""An acceptable correlation id; any other value is replaced by a new one (logs stay clean)."""

REQUEST_KINDS: dict[str, str] = {
    "POST /v1/topics": "CreateTopic",
    "GET /v1/topics": "ListTopics",
    "GET /v1/topics/{topic}": "DescribeTopic",
    "PATCH /v1/topics/{topic}": "UpdateTopic",
    "GET /v1/topics/{topic}/messages/{message_id}/trace": "TraceMessage",
    "DELETE /v1/topics/{topic}": "DeleteTopic",
    "GET /v1/groups/{group}": "DescribeGroup",
    "GET /v1/groups": "ListGroups",
    "GET /v1/groups/{group}/metrics": "GroupMetrics",
    "GET /v1/health": "Health",
    "GET /v1/openapi.json": "OpenApi",
    "GET /console": "ConsoleIndex",
    "GET /console/{name}": "ConsoleFile",
    "POST /v1/keys": "CreateKey",
    "GET /v1/keys": "ListKeys",
    "POST /v1/keys/{access_key}/disable": "DisableKey",
    "POST /v1/keys/{access_key}/enable": "EnableKey",
    "DELETE /v1/keys/{access_key}": "DeleteKey",
    "PUT /v1/groups/{group}": "UpdateGroup",
    "GET /v1/groups/{group}/dead-letters": "ListDeadLetters",
    "POST /v1/groups/{group}/dead-letters/redrive": "RedriveDeadLetters",
    "POST /v1/groups/{group}/dead-letters/purge": "PurgeDeadLetters",
    "POST /v1/topics/{topic}/messages": "SendMessages",
    "POST /v1/topics/{topic}/large-bodies": "GrantLargeBody",
    "DELETE /v1/topics/{topic}/scheduled/{message_id}": "CancelScheduled",
    "GET /v1/topics/{topic}/messages/{message_id}": "LookupMessage",
    "GET /v1/topics/{topic}/messages": "FindByKey",
    "POST /v1/groups/{group}/receive": "Receive",
    "POST /v1/groups/{group}/ack": "Ack",
    "POST /v1/groups/{group}/invisible": "ChangeInvisible",
    "PUT /v1/groups/{group}/subscriptions/{topic}": "Subscribe",
    "GET /v1/topics/{topic}/queues/{queue}/messages": "ReadMessages",
    "GET /v1/topics/{topic}/offsets": "TopicOffsets",
    "POST /v1/groups/{group}/offsets/{topic}/reset": "ResetOffsets",
    "POST /v1/groups/{group}/nack": "Nack",
    "POST /v1/groups/{group}/heartbeat": "Heartbeat",
    "DELETE /v1/groups/{group}/consumers/{client_id}": "Deregister",
    "POST /v1/producer-groups/{producer_group}/producers": "RegisterProducer",
    "POST /v1/producer-groups/{producer_group}/transactions/{transaction_id}/messages": (
        "SendHalfMessages"
    ),
    "POST /v1/producer-groups/{producer_group}/transactions/{transaction_id}/end": (
        "EndTransaction"
    ),
    "POST /v1/producer-groups/{producer_group}/checks": "PollChecks",
    "GET /v1/producer-groups/{producer_group}/transactions": "ListOpenTransactions",
    "GET /v1/producer-groups/{producer_group}/transactions/{transaction_id}": (
        "DescribeTransaction"
    ),
    "POST /v1/producer-groups/{producer_group}/transactions/{transaction_id}/resolve": (
        "ResolveTransaction"
    ),
    "POST /v1/producer-groups/{producer_group}/steps": "CommitStep",
    # RocketMQ's HTTP protocol (compat/mqhttp)
    "POST /topics/{topic}/messages": "MqHttpPublish",
    "GET /topics/{topic}/messages": "MqHttpConsume",
    "DELETE /topics/{topic}/messages": "MqHttpAck",
    # the SQS API (compat/sqs): JSON clients post to the root, query clients to a queue URL
    # (or GET it, presigned); a GET of the bare root is the redirect to the console
    "POST /": "SqsRoot",
    "POST /{account_id}/{queue_name}": "SqsQueueUrl",
    "GET /": "SqsRootGet",
    "GET /{account_id}/{queue_name}": "SqsQueueUrlGet",
}
"""API Gateway route key → request kind: the route's event name in template.yaml (a test
keeps them equal). A route missing here is named by its route key."""

REQUEST_METRICS = (
    "Requests",
    "Messages",
    "AckedMessages",
    "RequestBytes",
    "ResponseBytes",
    "Errors",
    "ClientErrors",
    "Faults",
    "Throttles",
    "Latency",
)
"""The metrics of every request, by ``RequestKind`` and for the whole service."""

_XML_CODE = re.compile(r"<(?:Code|ErrorCode)>([A-Za-z0-9.]{1,64})</(?:Code|ErrorCode)>")

_messages: contextvars.ContextVar[int] = contextvars.ContextVar("cirrusmq_messages", default=0)
_acked: contextvars.ContextVar[int] = contextvars.ContextVar("cirrusmq_acked", default=0)


def count_messages(count: int) -> None:
    """Record that this request sent, delivered, acked or nacked ``count`` messages."""
    _messages.set(_messages.get() + count)


def count_acked(count: int) -> None:
    """Record that this request acked ``count`` messages (an ack, or acks riding on a
    receive)."""
    _acked.set(_acked.get() + count)


def request_kind(route_key: str) -> str:
    """The request kind of an API Gateway route key (``Unknown`` without one)."""
    return REQUEST_KINDS.get(route_key, route_key or "Unknown")


def correlation_id(headers: Mapping[str, Any]) -> str:
    """The caller's correlation id if it is acceptable, else a new one."""
    for name, value in headers.items():
        if str(name).lower() == CORRELATION_HEADER.lower():
            text = str(value)
            if _CORRELATION_ID.fullmatch(text):
                return text
    return uuid.uuid4().hex


def observe(
    event: dict[str, Any],
    context: Any,
    resolve: Callable[[], dict[str, Any]],
    access_key: Callable[[], str | None],
) -> dict[str, Any]:
    """Resolve ``event`` with ``resolve()``, logging and measuring it."""
    started = time.monotonic()
    route_key = str(event.get("routeKey") or "")
    kind = request_kind(route_key)
    correlation = correlation_id(event.get("headers") or {})
    request_context = event.get("requestContext") or {}
    outer_keys = telemetry.current_keys()  # a resolve nested in another's (tests) restores them
    messages_token, acked_token = _messages.set(0), _acked.set(0)
    telemetry.bind(
        request_id=request_context.get("requestId"),
        function_request_id=getattr(context, "aws_request_id", None),
        route=route_key,
        request_kind=kind,
        correlation_id=correlation,
    )
    telemetry.annotate(request_kind=kind, correlation_id=correlation)
    response: dict[str, Any] | None = None
    try:
        with request_scope(lambda: current_broker().trace):  # one trace write per request
            response = resolve()
        return response
    finally:
        settle_after_request(kind)  # its one-off cost counts in the request's duration
        status = int((response or {}).get("statusCode") or 500)
        code = _error_code(response) if status >= 400 else None
        if response is not None:
            headers = response.setdefault("headers", {})
            headers[CORRELATION_HEADER] = correlation
            headers.update(NO_SNIFF)
        duration_ms = (time.monotonic() - started) * 1000
        telemetry.add_keys(access_key=access_key())
        log = telemetry.logger.warning if status >= 500 else telemetry.logger.info
        log(
            "request",
            extra={
                "status": status,
                "error_code": code,
                "duration_ms": round(duration_ms, 1),
                "messages": _messages.get(),
            },
        )
        _emit(kind, status, code, event, response, duration_ms)
        _messages.reset(messages_token)
        _acked.reset(acked_token)
        telemetry.bind(**outer_keys)


def _emit(
    kind: str,
    status: int,
    code: str | None,
    event: Mapping[str, Any],
    response: Mapping[str, Any] | None,
    duration_ms: float,
) -> None:
    count, bytes_ = MetricUnit.Count, MetricUnit.Bytes
    values = {
        "Requests": (count, 1),
        "Messages": (count, _messages.get()),
        "AckedMessages": (count, _acked.get()),
        "RequestBytes": (bytes_, utf8_size(str(event.get("body") or ""))),
        "ResponseBytes": (bytes_, utf8_size(str((response or {}).get("body") or ""))),
        "Errors": (count, int(status >= 400)),
        "ClientErrors": (count, int(400 <= status < 500)),
        "Faults": (count, int(status >= 500)),
        "Throttles": (count, int(status == 429)),
        "Latency": (MetricUnit.Milliseconds, round(duration_ms, 1)),
    }
    telemetry.emit_metrics(values, [{"RequestKind": kind}, {}])
    if code is not None:
        telemetry.emit_metrics(
            {"Errors": (count, 1)}, [{"RequestKind": kind, "ErrorCode": code}, {"ErrorCode": code}]
        )


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes as UTF-8 (a body's size on the wire)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _error_code(response: Mapping[str, Any] | None) -> str:
    """The stable ``code`` of an error answer: JSON ``code``, or the ``<Code>`` of an XML
    error (the RocketMQ HTTP protocol); ``HTTP<status>`` when it has none."""
    status = (response or {}).get("statusCode", 500)
    text = str((response or {}).get("body") or "")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    if code is None and (xml_code := _XML_CODE.search(text[:4096])) is not None:
        code = xml_code.group(1)
    return code if isinstance(code, str) and len(code) <= 64 else f"HTTP{status}"
