"""Builds a Powertools HTTP API resolver from routers, with the one error mapping."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker import limits
from cirrusmq_broker.errors import BrokerError, RequestTooLarge

log = logging.getLogger("cirrusmq.api")


def error_response(status: int, code: str, message: str, details: dict | None = None) -> Response:
    body: dict = {"code": code, "message": message}
    if details:
        body["details"] = details
    return Response(status, content_types.APPLICATION_JSON, json.dumps(body))


def create_app(*routers: APIGatewayHttpRouter) -> APIGatewayHttpResolver:
    """A resolver serving ``routers``, mapping every error to ``{code, message}`` JSON."""
    app = APIGatewayHttpResolver(enable_validation=True)
    app.use(middlewares=[_refuse_oversize])
    for router in routers:
        app.include_router(router)

    @app.exception_handler(BrokerError)
    def broker_error(exc: BrokerError) -> Response:
        return error_response(exc.http_status, exc.code, exc.message, exc.details)

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


def _refuse_oversize(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
    """Refuse a request over 6 MiB before it is parsed."""
    body = app.current_event.body
    if body is not None and len(body) > limits.MAX_REQUEST_BYTES:
        error = RequestTooLarge(
            f"request of {len(body)} bytes is over the {limits.MAX_REQUEST_BYTES} byte limit"
        )
        return error_response(error.http_status, error.code, error.message)
    return next_middleware(app)


def _describe(errors: Sequence[dict]) -> str:
    """One readable line from pydantic's validation errors."""
    if any(err.get("type") == "json_invalid" for err in errors):
        return "the request body is not valid JSON"
    problems = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"
