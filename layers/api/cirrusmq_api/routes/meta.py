"""Health and the OpenAPI document (covering every route of every function)."""

from __future__ import annotations

import functools
import json

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker import __version__
from cirrusmq_broker.settings import ENV_PREFIX, environment

from ..openapi import describe
from ..schemas import HealthBody

router = APIGatewayHttpRouter()


@router.get("/v1/health", summary="Liveness")
def health() -> HealthBody:
    websocket_url = environment().get(ENV_PREFIX + "WEBSOCKET_URL") or None
    return HealthBody(status="ok", version=__version__, ws_endpoint=websocket_url)


@router.get("/v1/openapi.json", summary="This API's OpenAPI document", include_in_schema=False)
def openapi():  # noqa: ANN201 (a JSON document, not a schema'd body)
    return Response(200, content_types.APPLICATION_JSON, openapi_document())


@functools.cache
def openapi_document() -> str:
    from ..app import create_app
    from . import (
        consume,
        consumers,
        dead_letters,
        groups,
        keys,
        offsets,
        produce,
        retries,
        steps,
        topics,
        transactions,
    )

    app = create_app(
        topics.router,
        groups.router,
        keys.router,
        router,
        produce.router,
        consume.router,
        consumers.router,
        retries.router,
        dead_letters.router,
    )
    app.include_router(offsets.router)  # reads by offset, queue offsets, offset reset
    app.include_router(transactions.router)
    app.include_router(steps.router)  # exactly-once consume -> produce
    schema = app.get_openapi_json_schema(
        title="CirrusMQ", version=__version__, description="Serverless RocketMQ-style queue."
    )
    document = json.loads(schema) if isinstance(schema, str) else schema
    return json.dumps(describe(document))
