"""Builds a Powertools HTTP API resolver from routers, with the one error mapping."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import pydantic_core
from aws_lambda_powertools.event_handler import (
    APIGatewayHttpResolver,
    CORSConfig,
    Response,
    content_types,
)
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from aws_lambda_powertools.shared.json_encoder import Encoder
from cirrusmq_broker import limits
from cirrusmq_broker.errors import BrokerError, RequestTooLarge, UnsupportedMediaType
from cirrusmq_broker.settings import cors_allow_origins
from cirrusmq_broker.telemetry import logger as log

from .access import authenticate_event, authenticated_key, check_access, claim_before_route
from .observability import CORRELATION_HEADER, observe, utf8_size

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a retriable 429 / 503 answer."""

JSON_MEDIA_TYPE = "application/json"
"""The only media type of a request body (any parameters, e.g. ``charset``); anything else,
an absent Content-Type included, gets 415: no form or multipart post from a web page."""
SIGNATURE_HEADERS = [
    "Authorization",
    "Content-Type",
    "X-Cirrus-Date",
    "X-Cirrus-Nonce",
    CORRELATION_HEADER,
]

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


class SignedApiResolver(APIGatewayHttpResolver):
    """Verifies the request signature of each event before resolving it.

    Powertools keeps the event and context being resolved on its ``BaseRouter`` class, which
    every resolver of the process shares. This resolver keeps its own: a resolver serves one
    request at a time (one Lambda environment), and the local stack runs several environments
    in one process, where a concurrent request would otherwise replace the event a route, the
    body validation or the access check is reading.
    """

    _resolving_event: Any = None
    _resolving_context: Any = None

    @property  # type: ignore[override]
    def current_event(self) -> Any:
        return self._resolving_event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._resolving_event = value

    @property  # type: ignore[override]
    def lambda_context(self) -> Any:
        return self._resolving_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._resolving_context = value

    def resolve(self, event: dict, context: Any) -> dict[str, Any]:
        resolve = lambda: self._resolve_signed(event, context)  # noqa: E731
        return observe(event, context, resolve, authenticated_key)

    def _resolve_signed(self, event: dict, context: Any) -> dict[str, Any]:
        authenticate_event(event)
        self.current_event = self._to_proxy_event(event)
        self.lambda_context = context
        return super().resolve(event, context)  # inside observe's trace scope


def create_app(*routers: APIGatewayHttpRouter) -> APIGatewayHttpResolver:
    """A resolver serving ``routers``, mapping every error to ``{code, message}`` JSON."""
    origins = cors_allow_origins()
    cors = (
        CORSConfig(
            allow_origin=origins[0],
            extra_origins=list(origins[1:]),
            allow_headers=SIGNATURE_HEADERS,
            expose_headers=[CORRELATION_HEADER],
        )
        if origins
        else None
    )
    app = SignedApiResolver(cors=cors, enable_validation=True, json_body_deserializer=read_json)
    # the answers' writer only: given as ``serializer=``, Powertools would also make it the
    # response validation's writer of objects it does not know, which must return values
    app._serializer = write_json
    _run_before_validation(app, _check_request)
    app.use(middlewares=[claim_before_route])  # after validation: see access.check_access
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


_POWERTOOLS_JSON = functools.partial(json.dumps, separators=(",", ":"), cls=Encoder)
"""What Powertools writes an answer with by default."""


def write_json(value: Any) -> str:
    """An answer's compact JSON, written by pydantic-core in about a third of the CPU time of
    ``json.dumps`` (tests/benchmarks/answer_json.py). Non-ASCII text goes out as UTF-8, never
    more bytes than the ``\\uXXXX`` escapes the receive's response size budget counts. What
    pydantic-core refuses (a lone surrogate) is written as Powertools writes it."""
    try:
        return pydantic_core.to_json(value).decode()
    except (pydantic_core.PydanticSerializationError, ValueError):
        return _POWERTOOLS_JSON(value)


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits()
        raise ValueError(f"an integer of {len(text)} digits is too long") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_json_readable(content_type: str) -> bool:
    """True if a body of this Content-Type is read as JSON: ``application/json`` with any
    parameters."""
    return content_type.split(";", 1)[0].strip().lower() == JSON_MEDIA_TYPE


def _check_request(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
    """Before the body is parsed: refuse it over 6 MiB; authenticate and authorize the
    request (401 / 403, :mod:`cirrusmq_api.access`); refuse a body that is not
    ``application/json`` (415)."""
    event = app.current_event
    body = event.body
    size = utf8_size(body) if body else 0
    if size > limits.MAX_REQUEST_BYTES:
        raise RequestTooLarge(
            f"request of {size} bytes is over the {limits.MAX_REQUEST_BYTES} byte limit"
        )
    check_access(app, read_json)
    if not body:
        return next_middleware(app)
    if event.http_method.upper() in BODY_METHODS:
        content_type = event.headers.get("content-type") or ""
        if not is_json_readable(content_type):
            raise UnsupportedMediaType(
                f"Content-Type {content_type[:100]!r} is not accepted; send application/json"
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
