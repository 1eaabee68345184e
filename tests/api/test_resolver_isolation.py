"""Two resolvers of one process (two local function environments) resolving at the same time
each read their own request: a route never sees the event another resolver is serving."""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_api.app import create_app


def probe_event(probe: str) -> dict:
    return {
        "version": "2.0",
        "routeKey": "GET /v1/health",
        "rawPath": "/v1/health",
        "rawQueryString": "",
        "headers": {"x-probe": probe},
        "requestContext": {"http": {"method": "GET", "path": "/v1/health"}, "stage": "$default"},
        "isBase64Encoded": False,
    }


def probing_app(during: list) -> APIGatewayHttpResolver:
    """An app whose route runs ``during`` (another resolve) and then answers with the probe
    header of the event it is serving, as route code reads it."""
    router = APIGatewayHttpRouter()

    @router.get("/v1/health")
    def health() -> dict:
        for action in during:
            action()
        return {"probe": router.current_event.headers.get("x-probe")}

    return create_app(router)


def probe_of(answer: dict) -> str:
    return json.loads(answer["body"])["probe"]


def test_a_route_reads_its_own_event_after_another_resolver_resolved_meanwhile():
    inner_answers: list[dict] = []
    inner = probing_app([])
    outer = probing_app([lambda: inner_answers.append(inner.resolve(probe_event("B"), None))])
    assert probe_of(outer.resolve(probe_event("A"), None)) == "A"
    assert [probe_of(a) for a in inner_answers] == ["B"]


def test_the_lambda_context_is_the_resolvers_own():
    seen: list = []
    inner = probing_app([])

    def resolve_inner() -> None:
        inner.resolve(probe_event("B"), "context-B")

    outer = probing_app([resolve_inner, lambda: seen.append(outer.lambda_context)])
    outer.resolve(probe_event("A"), "context-A")
    assert seen == ["context-A"]
