"""API Gateway HTTP API payload format 2.0: build the event, interpret the Lambda result."""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from cirrusmq_local.resolver import ACCOUNT_ID

__all__ = ["HttpRequest", "HttpResponse", "InvalidLambdaResponse", "build_event", "to_response"]

API_ID = "local"


class InvalidLambdaResponse(ValueError):
    """The handler's result cannot be turned into an HTTP response."""


@dataclass(frozen=True)
class HttpRequest:
    """What the gateway read from the wire (header names as sent, values as received)."""

    method: str
    raw_path: str
    raw_query: str
    headers: list[tuple[str, str]]
    body: bytes
    source_ip: str = "127.0.0.1"
    protocol: str = "HTTP/1.1"


@dataclass
class HttpResponse:
    """What the gateway writes back."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def _join_headers(pairs: list[tuple[str, str]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    return headers


def _query_parameters(raw_query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        params[key] = f"{params[key]},{value}" if key in params else value
    return params


def build_event(
    request: HttpRequest,
    route_key: str,
    path_parameters: Mapping[str, str],
    *,
    api_id: str = API_ID,
    account_id: str = ACCOUNT_ID,
    now: float | None = None,
) -> dict[str, Any]:
    """The ``version: "2.0"`` event API Gateway sends to a Lambda proxy integration.

    Headers are lower-cased and repeated ones comma-joined; ``cookie`` headers move to
    ``cookies``; a body that is not valid UTF-8 is base64-encoded with ``isBase64Encoded``.
    """
    now = time.time() if now is None else now
    headers = _join_headers(request.headers)
    cookie_header = headers.pop("cookie", None)
    host = headers.get("host", "localhost")
    domain = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    request_id = str(uuid.uuid4())
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": request.raw_path,
        "rawQueryString": request.raw_query,
    }
    if cookie_header:
        event["cookies"] = [
            c.strip() for c in cookie_header.replace(",", ";").split(";") if c.strip()
        ]
    event["headers"] = headers
    query = _query_parameters(request.raw_query)
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    event["requestContext"] = {
        "accountId": account_id,
        "apiId": api_id,
        "domainName": domain,
        "domainPrefix": domain.split(".", 1)[0],
        "http": {
            "method": request.method.upper(),
            "path": request.raw_path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": route_key,
        "stage": "$default",
        "time": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now * 1000),
    }
    if request.body:
        try:
            event["body"] = request.body.decode("utf-8")
            event["isBase64Encoded"] = False
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(request.body).decode("ascii")
            event["isBase64Encoded"] = True
    else:
        event["isBase64Encoded"] = False
    return event


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def to_response(result: Any) -> HttpResponse:
    """Interpret a handler result by the payload 2.0 rules.

    A dict with ``statusCode`` is a full response (``headers``, ``multiValueHeaders``,
    ``cookies`` → ``set-cookie``, ``body``, ``isBase64Encoded``). Anything else is a 200
    ``application/json`` response: a string is the body as is, other values their JSON.
    """
    if not isinstance(result, dict) or "statusCode" not in result:
        body = result if isinstance(result, str) else json.dumps(result)
        return HttpResponse(200, [("Content-Type", "application/json")], body.encode("utf-8"))
    status = result["statusCode"]
    if isinstance(status, bool) or not isinstance(status, int | str) or not str(status).isdigit():
        raise InvalidLambdaResponse(f"statusCode must be an integer, got {status!r}")
    status = int(status)
    if not 100 <= status <= 599:
        raise InvalidLambdaResponse(f"statusCode {status} is not an HTTP status")
    headers: list[tuple[str, str]] = []
    for name, value in (result.get("headers") or {}).items():
        headers.append((str(name), _text(value)))
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), _text(value)) for value in values or [])
    for cookie in result.get("cookies") or []:
        headers.append(("Set-Cookie", str(cookie)))
    body = result.get("body")
    if body is None:
        payload = b""
    elif not isinstance(body, str):
        payload = json.dumps(body).encode("utf-8")
    elif result.get("isBase64Encoded"):
        try:
            payload = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidLambdaResponse(f"body is not valid base64: {exc}") from exc
    else:
        payload = body.encode("utf-8")
    return HttpResponse(status, headers, payload)
