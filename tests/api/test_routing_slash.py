"""The router (the local gateway's and the function-URL front door's) routes a trailing slash
as API Gateway does: a route key cannot end in ``/``, and ``/x/`` goes to ``GET /x`` when no
route matches it as it is."""

from __future__ import annotations

from cirrusmq_api.routing import RouteMatch, RouteMiss, Router
from cirrusmq_local.template import HttpRoute

ROUTES = [
    HttpRoute("Index", "GET", "/console"),
    HttpRoute("File", "GET", "/console/{name}"),
    HttpRoute("Topic", "GET", "/v1/topics/{topic}"),
    HttpRoute("Send", "POST", "/v1/topics/{topic}/messages"),
]


def route_of(method: str, path: str) -> str | int:
    found = Router((route, route.event_name) for route in ROUTES).match(method, path)
    return found.target if isinstance(found, RouteMatch) else found.status


def test_a_trailing_slash_goes_to_the_route_without_it():
    assert route_of("GET", "/console/") == "Index"
    assert route_of("GET", "/console") == "Index"
    assert route_of("GET", "/console/app.js") == "File"
    assert route_of("GET", "/v1/topics/orders/") == "Topic"


def test_a_trailing_slash_changes_nothing_else():
    assert route_of("GET", "/console//") == 404  # one slash only: "/console/" has no route
    assert route_of("GET", "/v1/topics/") == 404  # "{topic}" never matches an empty segment
    assert route_of("GET", "/v1/topics/orders/messages/") == 404  # only the POST route there
    assert route_of("GET", "/") == 404
    assert route_of("POST", "/v1/topics/orders/messages/") == "Send"
    miss = Router((route, route.event_name) for route in ROUTES).match("DELETE", "/console/")
    assert isinstance(miss, RouteMiss) and miss.status == 404
