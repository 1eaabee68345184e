"""Builds a Powertools HTTP API resolver from routers, with the one error mapping."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker import limits
from cirrusmq_broker.errors import BrokerError, RequestTooLarge, UnsupportedMediaType

log = logging.getLogger("cirrusmq.api")

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a retriable 429 / 503 answer."""

READ_AS_JSON = frozenset(
    {"", "application/json", "application/x-www-form-urlencoded", "text/plain"}
)
"""Media types of a body read as JSON (``curl -d`` sends form-urlencoded), besides
``application/*+json``. Every other one gets 415."""

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body: dict = {"code": code, "message": message}
    if details:
        body["details"] = details
    return Response(status, content_types.APPLICATION_JSON, json.dumps(body), headers=headers)


def create_app(*routers: APIGatewayHttpRouter) -> APIGatewayHttpResolver:
    """A resolver serving ``routers``, mapping every error to ``{code, message}`` JSON."""
    app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=read_json)
    _run_before_validation(app, _check_body)
    for router in routers:
        app.include_router(router)

    @app.exception_handler(BrokerError)
    def broker_error(exc: BrokerError) -> Response:
        retry = exc.retriable and exc.http_status in (429, 503)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if retry else None
        return error_response(exc.http_status, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestUnsupportedContentType)
    def unsupported_media_type(_: RequestUnsupportedContentType) -> Response:
        return broker_error(UnsupportedMediaType("the request body must be JSON"))

    @app.exception_handler(RequestValidationError)
    def invalid_request(exc: RequestValidationError) -> Response:
        return error_response(400, "InvalidRequest", _describe(exc.errors()))

    @app.exception_handler(UnicodeDecodeError)
    def not_text(_: UnicodeDecodeError) -> Response:
        return error_response(400, "InvalidRequest", "the request body is not UTF-8 JSON")

    @app.not_found
    def route_not_found(_: Exception) -> Response:
        return error_response(404, "RouteNotFound", f"no route {app.current_event.path}")

    @app.exception_handler(Exception)
    def fault(exc: Exception) -> Response:
        log.exception("unhandled error")
        return error_response(500, "InternalError", "internal error; retry the request")

    return app


def read_json(text: str) -> Any:
    """Strict JSON: NaN / Infinity, an integer over Python's digit limit and nesting beyond
    the recursion limit are malformed JSON (400), never a fault."""
    try:
        return json.loads(text, parse_int=_integer, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from exc
    except RecursionError as exc:
        raise json.JSONDecodeError("nested too deeply", text, 0) from exc


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits()
        raise ValueError(f"an integer of {len(text)} digits is too long") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_json_readable(content_type: str) -> bool:
    """True if a body of this Content-Type is read as JSON (any parameters allowed)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media_type.partition("/")
    return media_type in READ_AS_JSON or (kind == "application" and subtype.endswith("+json"))


def _check_body(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
    """Before the body is parsed: refuse it over 6 MiB or when it cannot be JSON (415);
    otherwise have it read as JSON whatever its Content-Type said."""
    event = app.current_event
    body = event.body
    if not body:
        return next_middleware(app)
    if len(body) > limits.MAX_REQUEST_BYTES:
        raise RequestTooLarge(
            f"request of {len(body)} bytes is over the {limits.MAX_REQUEST_BYTES} byte limit"
        )
    if event.http_method.upper() in BODY_METHODS:
        content_type = event.headers.get("content-type") or ""
        if not is_json_readable(content_type):
            raise UnsupportedMediaType(
                f"Content-Type {content_type[:100]!r} cannot be JSON; send application/json"
            )
        headers = event.raw_event.get("headers") or {}
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        event.raw_event["headers"] = {**headers, "content-type": content_types.APPLICATION_JSON}
    return next_middleware(app)


def _run_before_validation(app: APIGatewayHttpResolver, middleware: Any) -> None:
    """Run ``middleware`` ahead of Powertools' request validation, which parses the body
    (``app.use`` middlewares run only after it)."""
    validate = getattr(app, "_request_validation_middleware", None)
    if validate is None:
        raise RuntimeError("aws_lambda_powertools changed: no request validation middleware")

    def check_then_validate(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Any:
        return middleware(app, lambda app: validate(app, next_middleware))

    app._request_validation_middleware = check_then_validate


def _describe(errors: Sequence[dict]) -> str:
    """One readable line from pydantic's validation errors."""
    for err in errors:
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error")
            return (
                f"the request body is not valid JSON: {reason}"
                if reason
                else ("the request body is not valid JSON")
            )
    problems = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"
