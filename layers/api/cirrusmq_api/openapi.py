"""Makes the generated OpenAPI document say what the service does.

It declares the request signature (security scheme ``CirrusSignature``; every route but
health needs it and may answer 401 / 403).

Powertools documents a 422 the service never sends and nothing of its real errors. This
replaces them with the error answers of each route (``ErrorBody``, ``Retry-After`` on the
retriable ones), documents a DELETE's 204, the name patterns of path and query parameters
and the item limits the service enforces (with its own codes, so they are documented here
rather than validated by pydantic).
"""

from __future__ import annotations

import copy
from typing import Any

from cirrusmq_broker import limits
from cirrusmq_broker.validation import MESSAGE_ID_PATTERN, NAME_PATTERN

from .schemas import ErrorBody

ERROR_REF = "#/components/schemas/ErrorBody"
BODY_METHODS = frozenset({"post", "put", "patch"})

ERROR_CODES: dict[int, str] = {
    400: "The request is invalid (InvalidRequest, InvalidTopicName, InvalidGroupName, "
    "InvalidOffset, InvalidTimestamp, "
    "InvalidMessage, TooManyMessages, MessageGroupRequired, InvalidFilterExpression, "
    "InvalidDuration, InvalidReceiptHandle, ForeignReceiptHandle, ReceiptHandleExpired, "
    "InvalidClientId, TooManyMembers, InvalidDelay, DelayNotAllowed, TooManyDueTimes); "
    "nothing was changed.",
    401: "Not authenticated (MissingSignature, InvalidSignature, RequestExpired, "
    "ReplayedRequest); nothing was changed.",
    403: "AccessDenied: the access key lacks the permission; nothing was changed.",
    404: "Not found (TopicNotFound, QueueNotFound, MessageNotFound, KeyNotFound, RouteNotFound, "
    "ScheduledMessageNotFound).",
    409: "Conflict (TopicAlreadyExists, TopicBeingDeleted, IdempotencyConflict, "
    "SubscriptionConflict, KeyInUse, AlreadyDelivered); nothing was changed.",
    413: "Too large (MessageTooLarge: a body over 4 MiB; RequestTooLarge: over 6 MiB).",
    415: "UnsupportedMediaType: a body must be application/json.",
    429: "Throttled or TooManyInflight; retriable after Retry-After seconds.",
    500: "InternalError: a fault; retriable.",
    503: "Busy: contention or storage unavailable; retriable after Retry-After seconds.",
}
RETRIABLE = frozenset({429, 503})
STORAGE_ERRORS = frozenset({429, 500, 503})
"""Every route that touches storage may answer these."""

ROUTE_ERRORS: dict[tuple[str, str], frozenset[int]] = {
    ("post", "/v1/topics"): frozenset({400, 409, 413, 415}),
    ("get", "/v1/topics"): frozenset(),
    ("get", "/v1/topics/{topic}"): frozenset({400, 404}),
    ("delete", "/v1/topics/{topic}"): frozenset({400, 404}),
    ("post", "/v1/topics/{topic}/messages"): frozenset({400, 404, 409, 413, 415}),
    ("get", "/v1/topics/{topic}/messages/{message_id}"): frozenset({400, 404}),
    ("post", "/v1/groups/{group}/receive"): frozenset({400, 404, 409, 413, 415}),
    ("post", "/v1/groups/{group}/ack"): frozenset({400, 404, 413, 415}),
    ("post", "/v1/groups/{group}/invisible"): frozenset({400, 404, 413, 415}),
    ("put", "/v1/groups/{group}/subscriptions/{topic}"): frozenset({400, 404, 409, 413, 415}),
    ("get", "/v1/groups/{group}"): frozenset({400, 404}),
    ("post", "/v1/groups/{group}/heartbeat"): frozenset({400, 404, 413, 415}),
    ("delete", "/v1/groups/{group}/consumers/{client_id}"): frozenset({400}),
    ("get", "/v1/health"): frozenset(),
    ("post", "/v1/keys"): frozenset({400, 413, 415}),
    ("get", "/v1/keys"): frozenset(),
    ("post", "/v1/keys/{access_key}/disable"): frozenset({400, 404, 409, 413, 415}),
    ("post", "/v1/keys/{access_key}/enable"): frozenset({400, 404, 413, 415}),
    ("delete", "/v1/keys/{access_key}"): frozenset({400, 404, 409}),
    # ---- reads by offset, queue offsets, offset reset
    ("get", "/v1/topics/{topic}/queues/{queue}/messages"): frozenset({400, 404}),
    ("get", "/v1/topics/{topic}/offsets"): frozenset({400, 404}),
    ("get", "/v1/topics/{topic}/messages"): frozenset({400, 404}),
    ("post", "/v1/groups/{group}/offsets/{topic}/reset"): frozenset({400, 404, 413, 415}),
    ("delete", "/v1/topics/{topic}/scheduled/{message_id}"): frozenset({400, 404, 409}),
}
"""Client errors per route (besides STORAGE_ERRORS); a route missing here gets 400, 404,
409 and, with a body, 413 and 415."""
NO_STORAGE = frozenset({("get", "/v1/health")})
UNSIGNED = NO_STORAGE
"""Routes open to anyone; every other one is signed and may answer 401 and 403."""
SECURITY_SCHEME = "CirrusSignature"
SECURITY_SCHEMES = {
    SECURITY_SCHEME: {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "CIRRUS-HMAC-SHA256 request signature: `Authorization: "
        "CIRRUS-HMAC-SHA256 Credential=<access key>, Signature=<hex>` with the headers "
        "`X-Cirrus-Date` (UTC, 20261123T010700Z, within 300 s of the service's clock) and "
        "`X-Cirrus-Nonce` (16-64 of [A-Za-z0-9_-], new for every request). The signature is "
        "HMAC-SHA256 with the secret key over: the algorithm, method, path as sent, canonical "
        "query, date, nonce and the SHA-256 of the body, joined by newlines (docs/http-api.md).",
    }
}

NAME_SCHEMA = {
    "type": "string",
    "pattern": NAME_PATTERN.pattern,
    "minLength": 1,
    "maxLength": 127,
}
PARAMETER_SCHEMAS = {
    "topic": NAME_SCHEMA,
    "group": NAME_SCHEMA,
    "access_key": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$", "minLength": 1},
    "client_id": {"type": "string", "pattern": "^[A-Za-z0-9@._:-]{1,128}$", "minLength": 1},
    # transactions
    "producer_group": NAME_SCHEMA,
    "transaction_id": {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{1,128}$", "minLength": 1},
    "message_id": {
        "type": "string",
        "pattern": MESSAGE_ID_PATTERN.pattern,
        "minLength": 1,
        "maxLength": limits.MAX_MESSAGE_ID_CHARS,
    },
}
PROPERTY_LIMITS: dict[tuple[str, str], dict[str, Any]] = {
    ("SendRequest", "messages"): {"minItems": 1, "maxItems": limits.MAX_MESSAGES_PER_SEND},
    ("SendRequest", "sequence"): {"maximum": 2**63 - 1},
    ("MessageIn", "keys"): {"maxItems": limits.MAX_KEYS},
    ("MessageIn", "message_id"): PARAMETER_SCHEMAS["message_id"],
    ("AckRequest", "receipt_handles"): {"minItems": 1, "maxItems": limits.MAX_ACK_HANDLES},
    ("CreateTopicRequest", "name"): NAME_SCHEMA,
    ("ReceiveRequest", "topic"): NAME_SCHEMA,
}
"""Limits the service checks itself (with specific codes), shown in the document."""


def describe(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of Powertools' ``document`` with the real answers, patterns and limits."""
    document = copy.deepcopy(document)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    document["components"]["securitySchemes"] = copy.deepcopy(SECURITY_SCHEMES)
    document["security"] = [{SECURITY_SCHEME: []}]
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            _describe_operation(method, path, operation)
    for (schema, field), extra in PROPERTY_LIMITS.items():
        _limit(schemas.get(schema, {}).get("properties", {}).get(field), extra)
    return document


def _describe_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)
    if method == "delete" and "200" in responses:
        responses.pop("200")
        responses["204"] = {"description": "Deleted (no body)."}
    has_body = "requestBody" in operation
    default = {400, 404, 409} | ({413, 415} if has_body else set())
    errors = set(ROUTE_ERRORS.get((method, path), default))
    errors |= {500} if (method, path) in NO_STORAGE else STORAGE_ERRORS
    if (method, path) in UNSIGNED:
        operation["security"] = []
    else:
        errors |= {401, 403}
    for status in sorted(errors):
        responses[str(status)] = _error_response(status)
    for parameter in operation.get("parameters", []):
        schema = PARAMETER_SCHEMAS.get(parameter.get("name", ""))
        if schema is not None:
            _limit(parameter.get("schema"), schema)


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERROR_CODES[status],
        "content": {"application/json": {"schema": {"$ref": ERROR_REF}}},
    }
    if status in RETRIABLE:
        response["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "required": True,
                "schema": {"type": "integer", "minimum": 0},
            }
        }
    return response


def _limit(schema: dict[str, Any] | None, extra: dict[str, Any]) -> None:
    """Add ``extra`` to a property schema, or to its string / array / number branch."""
    if schema is None:
        return
    branches = [b for b in schema.get("anyOf", []) if b.get("type") not in (None, "null")]
    for target in branches or [schema]:
        target.update({k: v for k, v in extra.items() if k != "type"})
