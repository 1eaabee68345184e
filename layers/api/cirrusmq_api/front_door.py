"""The function-URL front door: one Lambda function answers every route of the HTTP API.

A function URL hands its one function every request as an HTTP API payload 2.0 event with
``routeKey`` ``$default`` and no ``pathParameters``. :class:`FrontDoor` matches the request
against the HTTP API's routes the way API Gateway does (:mod:`cirrusmq_api.routing`), fills
in what API Gateway would have (``routeKey``, ``requestContext.routeKey``,
``pathParameters``) and calls the route's own handler in-process. Everything else of the
event (``rawPath``, ``rawQueryString``, the headers with ``host``, the body) passes
unchanged, so each handler checks the request's signature and the key's permissions exactly
as it does behind the HTTP API. The route table is generated from template.yaml
(``functions/front_door/routes.json``).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrusmq_api.routing import Route, RouteMatch, Router

__all__ = ["FrontDoor", "RouteTarget", "load_handler", "load_route_table"]

Handler = Callable[[dict[str, Any], Any], Any]
_loads = itertools.count(1)


@dataclass(frozen=True)
class RouteTarget:
    """The function a route belongs to in the HTTP API deployment, and its handler."""

    function: str
    """The function's logical id in template.yaml (for logs and errors)."""
    handler: Handler


class FrontDoor:
    """Routes function-URL events to the handlers of the HTTP API's routes."""

    def __init__(self, routes: Iterable[tuple[Route, RouteTarget]]) -> None:
        self.router: Router[RouteTarget] = Router(routes)

    def resolve(self, event: Mapping[str, Any], context: Any) -> Any:
        """Answer one function-URL event with the matched route's handler."""
        http = (event.get("requestContext") or {}).get("http") or {}
        method = str(http.get("method") or "GET").upper()
        raw_path = str(event.get("rawPath") or "/")
        match = self.router.match(method, raw_path)
        if not isinstance(match, RouteMatch):
            if match.status == 405:
                return _error(
                    405,
                    "MethodNotAllowed",
                    f"{method} is not allowed on {raw_path[:200]}",
                    {"Allow": ", ".join(match.allowed)},
                )
            return _error(404, "RouteNotFound", f"no route for {method} {raw_path[:200]}")
        return match.target.handler(routed_event(event, match), context)


def routed_event(event: Mapping[str, Any], match: RouteMatch[Any]) -> dict[str, Any]:
    """``event`` as API Gateway would have sent it to the route's function."""
    routed = dict(event)
    routed["routeKey"] = match.route.route_key
    routed["requestContext"] = {
        **(event.get("requestContext") or {}),
        "routeKey": match.route.route_key,
    }
    if match.path_parameters:
        routed["pathParameters"] = dict(match.path_parameters)
    else:
        routed.pop("pathParameters", None)
    return routed


def _error(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {
            "Content-Type": "application/json",
            "X-Content-Type-Options": "nosniff",
            **(headers or {}),
        },
        "body": json.dumps({"code": code, "message": message}),
        "isBase64Encoded": False,
    }


def load_handler(source: Path, name: str, module_name: str) -> Handler:
    """Import ``source`` (a function's entry point file) as ``module_name`` and return its
    function ``name``."""
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    handler = getattr(module, name, None)
    if not callable(handler):
        raise ImportError(f"{source} has no function {name!r}")
    return handler


def load_route_table(table: Path, functions_dir: Path) -> FrontDoor:
    """The front door of a route table (``routes.json``: per function its code directory
    under ``functions_dir``, its handler and its routes), every handler imported now.

    Imported at once, not on first use: a cold start pays for all of them, and each handler's
    module-level state is built in the same import as the API package it uses."""
    data = json.loads(table.read_text())
    routes: list[tuple[Route, RouteTarget]] = []
    unique = next(_loads)  # each load its own modules (the local runtime loads it per environment)
    for function, spec in data["functions"].items():
        module_path, _, name = spec["handler"].rpartition(".")
        source = (functions_dir / spec["code"]).joinpath(*module_path.split(".")).with_suffix(".py")
        handler = load_handler(source, name, f"_cirrusmq_front_door_{function}_{unique}")
        target = RouteTarget(function, handler)
        for key in spec["routes"]:
            method, _, path = key.partition(" ")
            routes.append((Route(method, path), target))
    return FrontDoor(routes)
