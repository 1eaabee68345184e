"""Match requests to HttpApi routes the way API Gateway HTTP APIs do: the local gateway
(infra/cirrusmq_local) and the function-URL front door (:mod:`cirrusmq_api.front_door`) both
route with it.

Literal segments beat ``{param}`` segments, which beat a greedy ``{param+}``; an explicit
method beats ``ANY``; ``$default`` catches whatever matches no route. A route key cannot end
in ``/``: a path with a trailing slash that matches no route goes to the route of the path
without it for its method (``/console/`` → ``GET /console``), as API Gateway routes it, with
the raw path unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar
from urllib.parse import unquote

__all__ = ["Route", "RouteError", "RouteLike", "RouteMatch", "RouteMiss", "Router"]

T = TypeVar("T")
_PARAM = re.compile(r"^\{([A-Za-z0-9_.-]+)(\+?)\}$")


class RouteError(ValueError):
    """A route that API Gateway would refuse (a bad path, a route key defined twice)."""


class RouteLike(Protocol):
    """What the router reads of a route: ``method`` upper-case (``ANY`` matches every
    method), ``path`` (``$default`` for the catch-all route) and the route key."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def route_key(self) -> str: ...


@dataclass(frozen=True)
class Route:
    """One route of the HTTP API, e.g. ``Route("POST", "/v1/topics/{topic}/messages")``."""

    method: str
    path: str

    @property
    def route_key(self) -> str:
        """API Gateway's route key, e.g. ``POST /v1/topics/{topic}`` (or ``$default``)."""
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class RouteMatch(Generic[T]):
    """A request matched ``route``; ``target`` is what was registered with it."""

    route: RouteLike
    target: T
    path_parameters: dict[str, str]


@dataclass(frozen=True)
class RouteMiss:
    """No route: ``status`` 404, or 405 when the path exists for other ``allowed`` methods."""

    status: int
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Compiled(Generic[T]):
    route: RouteLike
    target: T
    segments: tuple[tuple[str, str], ...]  # ("literal", text) | ("param", name) | ("greedy", name)

    @property
    def rank(self) -> tuple[int, ...]:
        kinds = {"literal": 0, "param": 1, "greedy": 2}
        return (*(kinds[kind] for kind, _ in self.segments), 1 if self.route.method == "ANY" else 0)

    def match(self, parts: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for index, (kind, value) in enumerate(self.segments):
            if kind == "greedy":
                rest = parts[index:]
                if not rest or rest == [""]:
                    return None
                params[value] = unquote("/".join(rest))
                return params
            if index >= len(parts):
                return None
            part = parts[index]
            if kind == "literal":
                if unquote(part) != value:
                    return None
            elif not part:
                return None
            else:
                params[value] = unquote(part)
        return params if len(parts) == len(self.segments) else None


def _compile(route: RouteLike, target: T) -> _Compiled[T]:
    if not route.path.startswith("/"):
        raise RouteError(f"route {route.route_key}: path must start with '/'")
    segments: list[tuple[str, str]] = []
    raw_segments = route.path[1:].split("/")
    for position, segment in enumerate(raw_segments):
        found = _PARAM.match(segment)
        if found is None:
            if "{" in segment or "}" in segment:
                raise RouteError(f"route {route.route_key}: bad path segment {segment!r}")
            segments.append(("literal", segment))
        elif found.group(2):
            if position != len(raw_segments) - 1:
                raise RouteError(f"route {route.route_key}: a greedy parameter must be last")
            segments.append(("greedy", found.group(1)))
        else:
            segments.append(("param", found.group(1)))
    return _Compiled(route, target, tuple(segments))


class Router(Generic[T]):
    """Holds ``(route, target)`` pairs; :meth:`match` finds the target for a request."""

    def __init__(self, entries: Iterable[tuple[RouteLike, T]]) -> None:
        self._routes: list[_Compiled[T]] = []
        self._default: RouteMatch[T] | None = None
        seen: set[str] = set()
        for route, target in entries:
            if route.route_key in seen:
                raise RouteError(f"route {route.route_key} is defined twice")
            seen.add(route.route_key)
            if route.path == "$default":
                self._default = RouteMatch(route, target, {})
            else:
                self._routes.append(_compile(route, target))
        self._routes.sort(key=lambda compiled: compiled.rank)

    @property
    def routes(self) -> list[RouteLike]:
        """All routes, most specific first (``$default`` last)."""
        routes = [compiled.route for compiled in self._routes]
        return routes + ([self._default.route] if self._default else [])

    def match(self, method: str, raw_path: str) -> RouteMatch[T] | RouteMiss:
        """The route for ``method`` and the raw (still percent-encoded) ``raw_path``."""
        method = method.upper()
        parts = raw_path[1:].split("/") if raw_path.startswith("/") else [raw_path]
        allowed: list[str] = []
        for compiled in self._routes:  # sorted: the first hit is the most specific
            params = compiled.match(parts)
            if params is None:
                continue
            if compiled.route.method in (method, "ANY"):
                return RouteMatch(compiled.route, compiled.target, params)
            if not _only_parameters(compiled.route.path):
                # a route of parameters only (the SQS queue URL) matches any path of its
                # length: it does not make another method's path "exist"
                allowed.append(compiled.route.method)
        if not allowed and len(parts) > 1 and parts[-1] == "":
            for compiled in self._routes:  # "/x/": the route of "/x" for this method, if any
                params = compiled.match(parts[:-1])
                if params is not None and compiled.route.method in (method, "ANY"):
                    return RouteMatch(compiled.route, compiled.target, params)
        if self._default is not None:
            return self._default
        if allowed:
            return RouteMiss(405, tuple(sorted(set(allowed))))
        return RouteMiss(404)


def _only_parameters(path: str) -> bool:
    """Whether every segment of a route path is a ``{parameter}``."""
    segments = path.strip("/").split("/")
    return all(seg.startswith("{") and seg.endswith("}") for seg in segments)
