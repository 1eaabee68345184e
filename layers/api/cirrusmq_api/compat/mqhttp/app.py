"""The adapter's request handling: authenticate, authorize, parse, call one broker service.

The routes (``/topics/{topic}/messages``):

- ``POST``: publish one message (``__TransCheckT``: a transactional half message);
- ``GET ?consumer=&numOfMessages=[&waitseconds=][&tag=][&trans=order|pop]``: consume
  (``order``: orderly, ``pop``: the transactional back-checks of a producer group);
- ``DELETE ?consumer=[&trans=commit|rollback]``: ack receipt handles, or end a transaction.

``ns`` (the ApsaraMQ instance id) is accepted on every route and ignored: a CirrusMQ
deployment is one instance.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from cirrusmq_broker import clock, limits
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import BrokerError
from cirrusmq_broker.rules.retries import retry_origin
from cirrusmq_broker.services.auth import Principal
from cirrusmq_broker.services.delivery import AckStatus
from cirrusmq_broker.telemetry import logger as log

from ...observability import count_messages, observe
from . import signature, transactions, wire
from .errors import MqHttpError, from_broker, invalid_argument, message_not_exist
from .messages import body_md5, consumed, message_input, transaction_immunity_seconds

MAX_BATCH = 16
"""numOfMessages: 1-16."""
MAX_WAIT_SECONDS = 30
"""waitseconds: 0-30; a wait over the broker's long-poll limit is served as that limit."""
NORMAL_INVISIBLE_SECONDS = 300
"""A consumed message comes again this long after its delivery unless acked."""
ORDERLY_INVISIBLE_SECONDS = 60
MAX_HANDLES = 16
VERSION = "2015-06-06"

_PARAMETERS = {
    "GET": ({"consumer", "numOfMessages"}, {"ns", "waitseconds", "tag", "trans"}),
    "POST": (set(), {"ns"}),
    "DELETE": ({"consumer"}, {"ns", "trans"}),
}
"""Per method: (required, optional) query parameters."""

_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("mqhttp_caller", default=None)


@dataclass(frozen=True)
class MqRequest:
    """One request, as received."""

    method: str
    topic: str
    target: str
    """The request-target as sent (path and query string, as signed)."""
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes
    principal: Principal

    def parameter(self, name: str) -> str | None:
        return self.query.get(name)


class MqHttpApp:
    """The Lambda handler's resolver for the protocol's routes."""

    def resolve(self, event: dict, context: Any) -> dict[str, Any]:
        return observe(event, context, lambda: self._answer(event), _caller.get)

    def _answer(self, event: dict) -> dict[str, Any]:
        _caller.set(None)
        request_id = uuid.uuid4().hex[:24].upper()
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        host_id = f"http://{headers.get('host', '')}"
        try:
            request = _read(event, headers)
            status, body = _ROUTES[request.method](request)
        except MqHttpError as exc:
            status, body = exc.status, wire.error_answer(exc.code, exc.message, request_id, host_id)
        except BrokerError as exc:
            error = from_broker(exc)
            status = error.status
            body = wire.error_answer(error.code, error.message, request_id, host_id)
        except Exception:
            log.exception("unhandled error")
            status = 500
            body = wire.error_answer("InternalError", "internal error", request_id, host_id)
        return {
            "statusCode": status,
            "headers": {
                "content-type": "text/xml;charset=utf-8",
                "x-mq-request-id": request_id,
                "x-mq-version": VERSION,
            },
            "body": body,
            "isBase64Encoded": False,
        }


# ------------------------------------------------------------------ reading a request
def _read(event: Mapping[str, Any], headers: Mapping[str, str]) -> MqRequest:
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "")).upper()
    raw_path = str(event.get("rawPath") or "")
    raw_query = str(event.get("rawQueryString") or "")
    if len(raw_path) + len(raw_query) > 1024:
        raise MqHttpError(400, "InvalidRequestURL", "the request line is over 1024 characters")
    topic = str((event.get("pathParameters") or {}).get("topic") or "")
    if method not in _ROUTES or not topic:
        raise MqHttpError(400, "InvalidRequestURL", f"no operation {method} {raw_path[:200]}")
    target = signature.request_target(raw_path, raw_query)
    principal = _authenticate(method, headers, target)
    body = _body(event)
    if len(body) > limits.MAX_REQUEST_BYTES:
        raise invalid_argument(f"the request body is over {limits.MAX_REQUEST_BYTES} bytes")
    signature.check_content_md5(headers, body)
    return MqRequest(method, topic, target, _query(method, raw_query), headers, body, principal)


def _authenticate(method: str, headers: Mapping[str, str], target: str) -> Principal:
    access_key, given = signature.read_authorization(headers)
    broker = current_broker()
    signature.check_date(headers, (broker.clock(), clock.wall_ms()))
    text = signature.string_to_sign(method, headers, target)
    principal = broker.auth.authenticate_with(
        access_key, lambda secret: signature.matches(secret, text, given)
    )
    _caller.set(principal.access_key)
    return principal


def _query(method: str, raw_query: str) -> dict[str, str]:
    required, optional = _PARAMETERS[method]
    try:
        pairs = parse_qsl(raw_query, keep_blank_values=True, strict_parsing=bool(raw_query))
    except ValueError:
        raise MqHttpError(400, "InvalidQueryString", "the query string is malformed") from None
    query: dict[str, str] = {}
    for name, value in pairs:
        if name not in required | optional:
            raise MqHttpError(400, "InvalidQueryString", f"unknown parameter {name[:64]!r}")
        if name in query:
            raise MqHttpError(400, "InvalidQueryString", f"parameter {name!r} is given twice")
        if not value:
            raise MqHttpError(400, "InvalidQueryString", f"parameter {name!r} is empty")
        query[name] = value
    missing = sorted(required - set(query))
    if missing:
        raise MqHttpError(400, "InvalidQueryString", f"parameter {missing[0]!r} is required")
    return query


def _body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise invalid_argument("the request body is not valid base64") from None
    return str(body).encode("utf-8", "surrogatepass")


def _number(request: MqRequest, name: str, low: int, high: int, default: int) -> int:
    value = request.parameter(name)
    if value is None:
        return default
    number = wire.whole_number(value, 9)
    if number is None or not low <= number <= high:
        raise invalid_argument(f"{name} must be {low}-{high}, not {value[:32]!r}")
    return number


def _require(allowed: bool, action: str) -> None:
    if not allowed:
        raise MqHttpError(403, "AccessDenied", f"this access key may not {action}")


# ------------------------------------------------------------------ operations
def _publish(request: MqRequest) -> tuple[int, str]:
    permissions = request.principal.permissions
    _require(
        permissions.may_publish(request.topic),
        f"publish to topic {request.topic}",
    )
    published = wire.parse_message(request.body)
    immunity = transaction_immunity_seconds(published)
    message = message_input(published)
    if immunity is not None:
        key = transactions.publish_key(
            request.principal.access_key,
            request.headers.get("date", ""),
            request.target,
            request.body,
        )
        sent = transactions.send_half(request.topic, message, immunity, request.principal, key)
        return 201, wire.publish_answer(sent.message_id, body_md5(message.body), sent.handle)
    result = current_broker().produce.send(request.topic, [message], None)
    count_messages(len(result.receipts))
    return 201, wire.publish_answer(result.receipts[0].message_id, body_md5(message.body))


def _consume(request: MqRequest) -> tuple[int, str]:
    group = request.query["consumer"]
    batch = _number(request, "numOfMessages", 1, MAX_BATCH, 1)
    wait = _number(request, "waitseconds", 0, MAX_WAIT_SECONDS, 0)
    wait = min(wait, limits.MAX_WAIT_SECONDS)
    trans = request.parameter("trans")
    if trans == "pop":
        return _answer_messages(
            transactions.pop_checks(request.topic, group, batch, wait, request.principal)
        )
    if trans not in (None, "order"):
        raise invalid_argument(f"trans must be order or pop on GET, not {trans[:32]!r}")
    permissions = request.principal.permissions
    _require(
        permissions.may_subscribe(group, request.topic),
        f"consume topic {request.topic} as group {group}",
    )
    invisible = ORDERLY_INVISIBLE_SECONDS if trans == "order" else NORMAL_INVISIBLE_SECONDS
    received = current_broker().consume.receive(
        group,
        request.topic,
        filter_expression=request.parameter("tag") or "*",
        max_messages=batch,
        invisible_seconds=invisible,
        wait_seconds=wait,
        access_key=None if permissions.admin else request.principal.access_key,
    )
    count_messages(len(received))
    return _answer_messages([consumed(r, invisible) for r in received])


def _answer_messages(messages: list[str]) -> tuple[int, str]:
    if not messages:
        raise message_not_exist()
    return 200, wire.consume_answer(messages)


def _delete(request: MqRequest) -> tuple[int, str]:
    handles = wire.parse_receipt_handles(request.body)
    if len(handles) > MAX_HANDLES:
        raise invalid_argument(f"at most {MAX_HANDLES} receipt handles per request")
    group, trans = request.query["consumer"], request.parameter("trans")
    if trans in ("commit", "rollback"):
        failed = transactions.end(request.topic, group, handles, trans, request.principal)
    elif trans is None:
        failed = _ack(request.topic, group, handles, request.principal)
    else:
        raise invalid_argument(f"trans must be commit or rollback on DELETE, not {trans[:32]!r}")
    if failed:
        return 404, wire.handle_errors_answer(failed)
    return 204, ""


def _ack(
    topic: str, group: str, handles: list[str], principal: Principal
) -> list[tuple[str, str, str]]:
    permissions = principal.permissions
    _require(
        permissions.may_subscribe(group, topic),
        f"consume topic {topic} as group {group}",
    )

    def allowed(handle_topic: str) -> bool:
        origin = retry_origin(group, handle_topic) or handle_topic
        return origin == topic and permissions.may_subscribe(group, origin)

    outcomes = current_broker().consume.ack(group, handles, allowed)
    count_messages(sum(o.status is AckStatus.ACKED for o in outcomes))
    return [
        (
            "ReceiptHandleError",
            (o.error.message if o.error else "") or f"the receipt handle is {o.status.value}",
            o.receipt_handle,
        )
        for o in outcomes
        if o.status is not AckStatus.ACKED
    ]


_ROUTES: dict[str, Callable[[MqRequest], tuple[int, str]]] = {
    "POST": _publish,
    "GET": _consume,
    "DELETE": _delete,
}
