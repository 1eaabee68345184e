"""The function-URL front door gives each route's handler the event API Gateway would have
given it: the route key and path parameters filled in, everything the signature covers
(raw path, raw query, headers with the host, body) unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cirrusmq_api.front_door import FrontDoor, RouteTarget, load_route_table
from cirrusmq_api.routing import Route


def function_url_event(method: str, raw_path: str, **extra: Any) -> dict[str, Any]:
    """A function URL's event (payload 2.0, route key ``$default``, no path parameters)."""
    host = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": extra.pop("raw_query", ""),
        "headers": {"host": host, "x-forwarded-proto": "https", "authorization": "sig"},
        "requestContext": {
            "accountId": "anonymous",
            "apiId": host.split(".")[0],
            "domainName": host,
            "http": {"method": method, "path": raw_path, "sourceIp": "192.0.2.1"},
            "routeKey": "$default",
            "stage": "$default",
        },
        "body": '{"a": 1}',
        "isBase64Encoded": False,
        **extra,
    }


def door(seen: list[tuple[str, dict[str, Any]]]) -> FrontDoor:
    def target(name: str) -> RouteTarget:
        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            seen.append((name, event))
            return {"statusCode": 200, "body": name}

        return RouteTarget(name, handler)

    return FrontDoor(
        [
            (Route("POST", "/v1/topics/{topic}/messages"), target("produce")),
            (Route("GET", "/v1/topics"), target("topics")),
            (Route("GET", "/console"), target("console")),
            (Route("POST", "/{account_id}/{queue_name}"), target("sqs")),
        ]
    )


def test_the_route_key_and_path_parameters_are_filled_in_the_rest_passes_unchanged() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    event = function_url_event("POST", "/v1/topics/or%2Fders/messages", raw_query="x=1")
    answer = door(seen).resolve(event, None)
    assert answer == {"statusCode": 200, "body": "produce"}
    [(name, routed)] = seen
    assert name == "produce"
    assert routed["routeKey"] == "POST /v1/topics/{topic}/messages"
    assert routed["requestContext"]["routeKey"] == routed["routeKey"]
    assert routed["pathParameters"] == {"topic": "or/ders"}
    for key in ("rawPath", "rawQueryString", "headers", "body", "isBase64Encoded"):
        assert routed[key] == event[key], key
    assert routed["requestContext"]["http"] == event["requestContext"]["http"]
    assert routed["requestContext"]["domainName"] == event["requestContext"]["domainName"]
    assert event["routeKey"] == "$default"  # the caller's event is not changed


def test_a_route_without_parameters_gets_none() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    door(seen).resolve(function_url_event("GET", "/v1/topics", pathParameters={"x": "y"}), None)
    [(_, routed)] = seen
    assert "pathParameters" not in routed


def test_a_trailing_slash_goes_where_api_gateway_sends_it() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    door(seen).resolve(function_url_event("GET", "/console/"), None)
    [(name, routed)] = seen
    assert (name, routed["rawPath"], routed["routeKey"]) == ("console", "/console/", "GET /console")


def test_no_route_is_a_json_404_and_another_method_a_405() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    front = door(seen)
    missing = front.resolve(function_url_event("GET", "/v2/topics"), None)
    assert missing["statusCode"] == 404
    assert json.loads(missing["body"])["code"] == "RouteNotFound"
    wrong = front.resolve(function_url_event("DELETE", "/v1/topics"), None)
    assert wrong["statusCode"] == 405
    assert wrong["headers"]["Allow"] == "GET"
    assert json.loads(wrong["body"])["code"] == "MethodNotAllowed"
    assert seen == []


def test_a_route_table_loads_each_functions_handler(tmp_path: Path) -> None:
    for code, reply in (("one", "first"), ("two", "second")):
        (tmp_path / code).mkdir()
        (tmp_path / code / "app.py").write_text(
            f"def lambda_handler(event, context):\n    return {{'statusCode': 200, 'body': "
            f"'{reply} ' + event['routeKey'] + ' ' + str(event.get('pathParameters'))}}\n"
        )
    table = tmp_path / "routes.json"
    table.write_text(
        json.dumps(
            {
                "functions": {
                    "OneFunction": {
                        "code": "one",
                        "handler": "app.lambda_handler",
                        "routes": ["GET /a/{x}"],
                    },
                    "TwoFunction": {
                        "code": "two",
                        "handler": "app.lambda_handler",
                        "routes": ["POST /b", "GET /"],
                    },
                }
            }
        )
    )
    front = load_route_table(table, functions_dir=tmp_path)
    assert front.resolve(function_url_event("GET", "/a/7"), None)["body"] == (
        "first GET /a/{x} {'x': '7'}"
    )
    assert front.resolve(function_url_event("POST", "/b"), None)["body"] == "second POST /b None"
    assert front.resolve(function_url_event("GET", "/"), None)["body"] == "second GET / None"
