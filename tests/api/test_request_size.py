"""A request body is measured against the 6 MiB limit in UTF-8 bytes, before it is parsed."""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_api.app import create_app
from cirrusmq_broker import limits


def test_a_request_over_the_limit_in_utf8_bytes_is_refused_as_too_large():
    """Counted in bytes, not characters: 3.2 M characters of 'é' are 6.4 MB."""
    router = APIGatewayHttpRouter()

    @router.post("/v1/echo")
    def echo() -> dict:
        return {}

    body = json.dumps({"text": "é" * 3_200_000}, ensure_ascii=False)
    assert len(body) <= limits.MAX_REQUEST_BYTES < len(body.encode())
    event = {
        "version": "2.0",
        "routeKey": "POST /v1/echo",
        "rawPath": "/v1/echo",
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/v1/echo"}, "stage": "$default"},
        "isBase64Encoded": False,
        "body": body,
    }
    answer = create_app(router).resolve(event, None)
    assert answer["statusCode"] == 413
    assert json.loads(answer["body"])["code"] == "RequestTooLarge"
