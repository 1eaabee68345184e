"""One SQS request: read its protocol, verify its SigV4 signature, run its action, answer
in its protocol. Every failure is an SQS error answer; only a fault is a 500."""

from __future__ import annotations

import base64
import binascii
import contextvars
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from cirrusmq_broker import clock, limits
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import BrokerError
from cirrusmq_broker.telemetry import logger as log

from . import message_actions, move_tasks, protocol, queue_actions, sigv4
from .context import Call
from .errors import SqsError, from_broker

Action = Callable[[Call, dict[str, Any]], dict[str, Any]]

ACTIONS: dict[str, Action] = {
    "CreateQueue": queue_actions.create_queue,
    "GetQueueUrl": queue_actions.get_queue_url,
    "ListQueues": queue_actions.list_queues,
    "GetQueueAttributes": queue_actions.get_queue_attributes,
    "SetQueueAttributes": queue_actions.set_queue_attributes,
    "DeleteQueue": queue_actions.delete_queue,
    "PurgeQueue": queue_actions.purge_queue,
    "SendMessage": message_actions.send_message,
    "SendMessageBatch": message_actions.send_message_batch,
    "ReceiveMessage": message_actions.receive_message,
    "DeleteMessage": message_actions.delete_message,
    "DeleteMessageBatch": message_actions.delete_message_batch,
    "ChangeMessageVisibility": message_actions.change_message_visibility,
    "ChangeMessageVisibilityBatch": message_actions.change_message_visibility_batch,
    "ListDeadLetterSourceQueues": queue_actions.list_dead_letter_source_queues,
    "StartMessageMoveTask": move_tasks.start_message_move_task,
    "ListMessageMoveTasks": move_tasks.list_message_move_tasks,
    "CancelMessageMoveTask": move_tasks.cancel_message_move_task,
    "TagQueue": queue_actions.tag_queue,
    "UntagQueue": queue_actions.untag_queue,
    "ListQueueTags": queue_actions.list_queue_tags,
    "AddPermission": queue_actions.add_permission,
    "RemovePermission": queue_actions.remove_permission,
}
"""The supported actions (docs/compat.md#sqs has the table)."""

ROOT_ONLY_ACTIONS = frozenset({"CreateQueue", "ListQueues"})
"""Actions a GET on a queue URL may not name (SQS: "not valid for this endpoint")."""
CONSOLE_HOME = "/console/"
_ACCOUNT = re.compile(r"\d{12}")
"""A queue URL's account id: 12 digits. Another two-segment POST (``/v1/nothing``) is no
queue URL: it is answered like any unknown route."""


def _route_not_found(event: Mapping[str, Any]) -> dict[str, Any]:
    path = str(event.get("rawPath") or "")
    return {
        "statusCode": 404,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"code": "RouteNotFound", "message": f"no route {path[:200]}"}),
        "isBase64Encoded": False,
    }


_signer: contextvars.ContextVar[str | None] = contextvars.ContextVar("sqs_signer", default=None)


def authenticated_key() -> str | None:
    """The access key whose signature the request being answered carried: for logs."""
    return _signer.get()


def handle(event: Mapping[str, Any]) -> dict[str, Any]:
    """Answer one API Gateway (HTTP API v2) event."""
    _signer.set(None)
    account = (event.get("pathParameters") or {}).get("account_id")
    if account is not None and not _ACCOUNT.fullmatch(account):
        return _route_not_found(event)
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    try:
        body = _body(event)
    except SqsError as exc:
        return protocol.error_answer(protocol.QUERY, exc)
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "POST"))
    if method.upper() == "GET":
        if account is None and not event.get("rawQueryString"):
            return _console_redirect()
        kind = protocol.QUERY  # a GET is a query request, whatever its headers say
    else:
        kind = protocol.detect(headers, body)
    try:
        return _handle(event, headers, body, kind)
    except SqsError as exc:
        return protocol.error_answer(kind, exc)
    except BrokerError as exc:
        return protocol.error_answer(kind, from_broker(exc))
    except Exception:
        log.exception("unhandled error in the SQS adapter")
        error = SqsError("InternalError", "internal error; retry the request", status=500)
        error.sender = False
        return protocol.error_answer(kind, error)


def _handle(
    event: Mapping[str, Any], headers: dict[str, str], body: bytes, kind: str
) -> dict[str, Any]:
    http = (event.get("requestContext") or {}).get("http") or {}
    method = str(http.get("method", "POST")).upper()
    raw_path = str(event.get("rawPath") or "/")
    raw_query = str(event.get("rawQueryString") or "")
    if len(body) > limits.MAX_REQUEST_BYTES:
        raise SqsError("RequestTooLarge", "The request is too large.", status=413)
    broker = current_broker()
    principal = sigv4.verify(
        method=method,
        raw_path=raw_path,
        raw_query=raw_query,
        headers=headers,
        body=body,
        lookup=broker.auth.signing_key,
        now_ms=(broker.clock(), clock.wall_ms()),
    )
    _signer.set(principal.access_key)
    if method == "GET" and "Action" not in dict(parse_qsl(raw_query)):
        return protocol.unknown_operation()
    # a GET's parameters are its query string (a body, if any, is no part of them)
    request = protocol.parse(kind, headers, b"" if method == "GET" else body, raw_query)
    action = ACTIONS.get(request.action)
    queue_in_path = (event.get("pathParameters") or {}).get("queue_name")
    if action is None or (
        method == "GET" and queue_in_path and request.action in ROOT_ONLY_ACTIONS
    ):
        raise SqsError(
            "InvalidAction",
            f"The action {request.action[:100]} is not valid for this endpoint.",
            query_code="InvalidAction",
        )
    params = dict(request.params)
    if queue_in_path and "QueueUrl" not in params and request.action != "CreateQueue":
        params["QueueUrl"] = raw_path  # the query protocol posts to the queue URL
    call = Call(
        broker=broker,
        principal=principal,
        endpoint=_endpoint(headers),
        region=sigv4.region(headers, raw_query) or "us-east-1",
        trace_header=headers.get("x-amzn-trace-id"),
    )
    result = action(call, params)
    if method == "GET" and "application/json" in headers.get("accept", ""):
        return protocol.query_json_answer(request.action, result)
    return protocol.answer(kind, request.action, result)


def _console_redirect() -> dict[str, Any]:
    """The service's root, asked for by a browser (a GET without a query): the console."""
    return {
        "statusCode": 302,
        "headers": {"Content-Type": "text/plain", "Location": CONSOLE_HOME},
        "body": "",
        "isBase64Encoded": False,
    }


def _endpoint(headers: Mapping[str, str]) -> str:
    host = headers.get("host", "localhost")
    scheme = headers.get("x-forwarded-proto", "").split(",")[0].strip() or "http"
    return f"{scheme}://{host}"


def _body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise SqsError("MalformedQueryString", "The request body is not valid.") from None
    return str(body).encode("utf-8", "surrogatepass")
