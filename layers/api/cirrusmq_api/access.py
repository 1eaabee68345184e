"""Who may call what: the one place every request is authenticated and authorized.

:func:`authenticate_event` verifies the signature of the raw event before Powertools
resolves it (its I/O — the key, the nonce — runs outside Powertools' per-request state,
which is process-wide); :func:`check_access` then runs before the body is parsed, for every
route of every function: ``GET /v1/health``, ``GET /v1/openapi.json`` and the web console's
files (``GET /console/...``, static pages that sign their own API calls) are open; every
other route needs a signed request (401 otherwise, docs/AUTH-SPEC.md) and then the
permission :data:`ROUTE_RULES` names for it (403 otherwise). A route missing from the table
is refused to everyone (deny by default). Checks that depend on more than the route (the
topic inside each receipt handle of an ack; the topics a list shows) use
:func:`current_principal` in the route.

Replay protection: an authorized request's nonce is claimed (one conditional write) before
the route runs, except where a replay cannot change anything the request itself did not:
reads (``GET``) never claim it; a send and an ack claim it through :func:`claim_request`
only when a replay would cost or change something (:data:`CLAIMED_BY_ROUTE`): a replayed
stamped send is answered from its idempotency record and stores nothing; an ack whose
leases are all settled by its fast path (one conditional delete each) records nothing.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import AccessDenied, InvalidRequest, MissingSignature
from cirrusmq_broker.rules.retries import DLQ_PREFIX, retry_origin, retry_parts
from cirrusmq_broker.services.auth import Principal, SignedRequest

from .routes.console import is_console_path

KEYS_PATH = "/v1/keys"
"""Requests to the keys API re-read the caller's key (never trust a cache there)."""
UNSIGNED = frozenset(
    {
        ("GET", "/v1/health"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/console"),
        ("GET", "/console/"),  # API Gateway routes it to GET /console
        ("GET", "/console/{name}"),
    }
)
"""Routes anyone may call."""

Params = Mapping[str, str]
Rule = Callable[[Principal, Params, Callable[[], Any]], None]
"""Raises AccessDenied unless the principal may call the route with these path parameters
(and this JSON body, read on demand)."""

_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "cirrusmq_principal", default=None
)


@dataclass(frozen=True)
class _Authenticated:
    """What :func:`authenticate_event` found: a principal, or the error to answer with."""

    principal: Principal | None
    error: Exception | None
    body: bytes


_authenticated: contextvars.ContextVar[_Authenticated | None] = contextvars.ContextVar(
    "cirrusmq_authenticated", default=None
)
_claim: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "cirrusmq_claim", default=None
)
_deferred: contextvars.ContextVar[bool] = contextvars.ContextVar("cirrusmq_deferred", default=False)

CLAIMED_BY_ROUTE = frozenset(
    {("POST", "/v1/topics/{topic}/messages"), ("POST", "/v1/groups/{group}/ack")}
)
"""Routes that claim the nonce themselves (:func:`claim_request`), only where it matters:
a send when it is not stamped (a replay would store it again); an ack before anything but
the whole-lease deletes of its fast path (a partial ack's replay would rewrite its lease, a
repeated one's sorting out costs reads: the claim bounds both to the first replay)."""


def current_principal() -> Principal:
    """The access key that signed the request being handled."""
    principal = _principal.get()
    if principal is None:  # a route outside ROUTE_RULES asked: never allow
        raise AccessDenied("access denied: the request is not authenticated for this route")
    return principal


def authenticated_key() -> str | None:
    """The id of the access key whose signature the request being handled carried (None if
    it carried no valid one): for logs."""
    authenticated = _authenticated.get()
    principal = authenticated.principal if authenticated is not None else None
    return principal.access_key if principal is not None else None


def acting_key() -> str | None:
    """The caller's access key, which a registration it acts for (a consumer's client id)
    must have been made with; None for an admin key, which may act for any."""
    principal = current_principal()
    return None if principal.permissions.admin else principal.access_key


# ------------------------------------------------------------------------------ rules
def _admin(action: str) -> Rule:
    def rule(p: Principal, params: Params, _: Callable[[], Any]) -> None:
        p.require(p.permissions.admin, action.format(**params))

    return rule


def _any_key(p: Principal, params: Params, body: Callable[[], Any]) -> None:
    """Authenticated is enough (the route filters what it shows)."""


def _see_topic(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    topic = params["topic"]
    p.require(p.permissions.may_see_topic(topic), f"describe topic {topic}")


def _publish(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    topic = params["topic"]
    p.require(p.permissions.may_publish(topic), f"publish to topic {topic}")


def _read_topic(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    topic = params["topic"]
    p.require(p.permissions.may_subscribe_topic(topic), f"read messages of topic {topic}")


def _find_by_key(p: Principal, params: Params, body: Callable[[], Any]) -> None:
    """A lookup reads like a consumer: a user topic with a grant naming it, a group's retry
    topic with a grant to consume its topic as the group, a dead-letter topic as admin."""
    topic = params["topic"]
    parts = retry_parts(topic)
    if parts is not None:
        group, origin = parts
        p.require(p.permissions.may_subscribe(group, origin), f"read retries of group {group}")
    elif topic.startswith(DLQ_PREFIX):
        p.require(p.permissions.admin, f"read dead letters of topic {topic}")
    else:
        _read_topic(p, params, body)


def _consume(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    group, topic = params["group"], params["topic"]
    p.require(p.permissions.may_subscribe(group, topic), f"consume topic {topic} as group {group}")


def _receive(p: Principal, params: Params, body: Callable[[], Any]) -> None:
    group, document = params["group"], body()
    topic = document.get("topic") if isinstance(document, dict) else None
    if isinstance(topic, str):
        _consume(p, {"group": group, "topic": topic}, body)
    else:  # malformed: refused by validation next, unless the key may not act as the group
        _as_group(p, params, body)


def _as_group(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    group = params["group"]
    p.require(p.permissions.may_subscribe_group(group), f"consume as group {group}")


# ---------------------------------------------------------- transactions
def _producer(p: Principal, params: Params, _: Callable[[], Any]) -> None:
    """A key that may publish somewhere may act as a transactional producer; the routes
    check the transaction's topic (may_publish) themselves."""
    p.require(
        p.permissions.admin or bool(p.permissions.publish),
        f"act as a transactional producer of group {params.get('producer_group', '')}",
    )


def _txn_send(p: Principal, params: Params, body: Callable[[], Any]) -> None:
    document = body()
    topic = document.get("topic") if isinstance(document, dict) else None
    if isinstance(topic, str):
        _publish(p, {"topic": topic}, body)
    else:  # malformed: refused by validation next
        _producer(p, params, body)


_TXN = "/v1/producer-groups/{producer_group}"
TRANSACTION_ROUTE_RULES: dict[tuple[str, str], Rule] = {
    ("POST", f"{_TXN}/producers"): _producer,
    ("POST", f"{_TXN}/transactions/{{transaction_id}}/messages"): _txn_send,
    ("POST", f"{_TXN}/transactions/{{transaction_id}}/end"): _producer,  # + the txn's topic
    ("POST", f"{_TXN}/checks"): _producer,
    ("POST", f"{_TXN}/steps"): _producer,  # + per output topic and receipt handle
    ("GET", f"{_TXN}/transactions"): _admin("list transactions of {producer_group}"),
    ("GET", f"{_TXN}/transactions/{{transaction_id}}"): _admin("describe transactions"),
    ("POST", f"{_TXN}/transactions/{{transaction_id}}/resolve"): _admin("end transactions"),
}
# ---------------------------------------------------- end of transactions


ROUTE_RULES: dict[tuple[str, str], Rule] = {
    ("POST", "/v1/topics"): _admin("create topics"),
    ("GET", "/v1/topics"): _any_key,
    ("GET", "/v1/topics/{topic}"): _see_topic,
    ("DELETE", "/v1/topics/{topic}"): _admin("delete topic {topic}"),
    ("PATCH", "/v1/topics/{topic}"): _admin("update topic {topic}"),
    ("POST", "/v1/topics/{topic}/messages"): _publish,
    ("POST", "/v1/topics/{topic}/large-bodies"): _publish,
    ("GET", "/v1/topics/{topic}/messages/{message_id}"): _read_topic,
    ("GET", "/v1/topics/{topic}/messages/{message_id}/trace"): _read_topic,  # as a lookup
    ("POST", "/v1/groups/{group}/receive"): _receive,
    ("PUT", "/v1/groups/{group}/subscriptions/{topic}"): _consume,
    ("POST", "/v1/groups/{group}/ack"): _as_group,  # + per handle: ack_permission()
    ("POST", "/v1/groups/{group}/invisible"): _as_group,  # + the handle's topic
    ("GET", "/v1/groups/{group}"): _as_group,
    ("GET", "/v1/groups"): _any_key,  # shows the groups the key may consume as
    ("GET", "/v1/groups/{group}/metrics"): _as_group,  # + the topic filter in the route
    # consumers: + per subscribed topic in the heartbeat route
    ("POST", "/v1/groups/{group}/heartbeat"): _as_group,
    ("DELETE", "/v1/groups/{group}/consumers/{client_id}"): _as_group,
    ("POST", "/v1/keys"): _admin("create access keys"),
    ("GET", "/v1/keys"): _admin("list access keys"),
    ("POST", "/v1/keys/{access_key}/disable"): _admin("disable access key {access_key}"),
    ("POST", "/v1/keys/{access_key}/enable"): _admin("enable access key {access_key}"),
    ("DELETE", "/v1/keys/{access_key}"): _admin("delete access key {access_key}"),
    # ---- reads by offset, queue offsets, offset reset
    ("GET", "/v1/topics/{topic}/queues/{queue}/messages"): _read_topic,
    ("GET", "/v1/topics/{topic}/messages"): _find_by_key,
    ("GET", "/v1/topics/{topic}/offsets"): _see_topic,
    ("POST", "/v1/groups/{group}/offsets/{topic}/reset"): _consume,
    # ---- retries and dead letters
    ("POST", "/v1/groups/{group}/nack"): _as_group,  # + per handle, like an ack
    ("PUT", "/v1/groups/{group}"): _admin("change settings of group {group}"),
    ("GET", "/v1/groups/{group}/dead-letters"): _admin("list dead letters of group {group}"),
    ("POST", "/v1/groups/{group}/dead-letters/redrive"): _admin("redrive group {group}"),
    ("POST", "/v1/groups/{group}/dead-letters/purge"): _admin("purge group {group}"),
    # ---- end of retries
    **TRANSACTION_ROUTE_RULES,
    # delayed messages: who may publish to a topic may cancel its delayed ones
    ("DELETE", "/v1/topics/{topic}/scheduled/{message_id}"): _publish,
}
"""(method, route) → the permission it needs."""


def may_consume(group: str) -> Callable[[str], bool]:
    """Per receipt handle: whether the caller may consume the handle's topic as ``group``."""
    permissions = current_principal().permissions

    def allowed(topic: str) -> bool:
        # the group's retry topic of T is consumed exactly when T may be
        origin = retry_origin(group, topic)
        return permissions.may_subscribe(group, topic if origin is None else origin)

    return allowed


PUBLISHER_TRACE_FIELDS = ("producer_id", "transaction_id")
"""Trace event fields only a key that may publish to the topic sees (the API shows a
producer's and a transaction's ids to producers, not to consumers)."""


def visible_trace_events(topic: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The part of a message's trace the caller could read through the API: events of a
    group it may not consume ``topic`` as are left out (describing a group needs that
    permission), producer and transaction ids are left out unless it may publish to it."""
    permissions = current_principal().permissions
    publisher = permissions.may_publish(topic)
    visible = []
    for event in events:
        group = event.get("group")
        if group is not None and not permissions.may_subscribe(group, topic):
            continue
        if not publisher:
            event = {k: v for k, v in event.items() if k not in PUBLISHER_TRACE_FIELDS}
        visible.append(event)
    return visible


# -------------------------------------------------------------------------- middleware
def authenticate_event(event: Mapping[str, Any]) -> None:
    """Verify the raw API Gateway event's signature (before the route is resolved); the
    outcome is kept for :func:`check_access`, which answers with it."""
    http = (event.get("requestContext") or {}).get("http") or {}
    method, path = str(http.get("method", "")).upper(), str(event.get("rawPath") or "")
    if (method, path) in UNSIGNED or is_console_path(method, path):
        _authenticated.set(None)
        return
    try:
        body = _raw_body(event)
        request = SignedRequest(
            method=method,
            path=path,
            raw_query=str(event.get("rawQueryString") or ""),
            headers={str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()},
            body=body,
        )
        principal = current_broker().auth.authenticate(
            request, fresh=path.startswith(KEYS_PATH), claim=False
        )
    except Exception as exc:  # answered through the one error mapping, in check_access
        _authenticated.set(_Authenticated(None, exc, b""))
        return
    _authenticated.set(_Authenticated(principal, None, body))


def check_access(app: APIGatewayHttpResolver, read_json: Callable[[str], Any]) -> None:
    """Authorize the matched route for the authenticated key and decide whether and when the
    request's nonce is claimed; raise a 401/403 error."""
    _principal.set(None)
    _claim.set(None)
    _deferred.set(False)
    route = app.context.get("_route")
    key = (str(getattr(route, "method", "")).upper(), str(getattr(route, "openapi_path", "")))
    if key in UNSIGNED:
        return
    authenticated = _authenticated.get()
    if authenticated is None:
        raise MissingSignature("sign the request (see docs/http-api.md#authentication)")
    if authenticated.error is not None:
        raise authenticated.error
    principal = authenticated.principal
    assert principal is not None
    _principal.set(principal)
    rule = ROUTE_RULES.get(key)
    if rule is None:
        raise AccessDenied("access denied: no access key may call this route")
    params = {k: str(v) for k, v in (app.context.get("_route_args") or {}).items()}
    rule(principal, params, lambda: _json_or_none(authenticated.body, read_json))
    if key[0] == "GET":
        return  # reads change nothing: their replay is harmless
    # Claimed once the body is validated (claim_before_route), not here: a request the
    # validation refuses changes nothing, so it records no nonce either.
    _claim.set(_once(lambda: current_broker().auth.claim(principal)))
    _deferred.set(key in CLAIMED_BY_ROUTE)


def claim_before_route(app: APIGatewayHttpResolver, next_middleware: Callable[..., Any]) -> Any:
    """Middleware (after validation): claim the nonce before the route runs, unless the
    route claims it itself (:data:`CLAIMED_BY_ROUTE`)."""
    if not _deferred.get():
        claim_request()
    return next_middleware(app)


def claim_request() -> None:
    """Claim the nonce of the request being handled, at most once (401 ReplayedRequest if
    it was claimed before); a no-op where the route needs no claim."""
    claim = _claim.get()
    if claim is not None:
        claim()


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def run() -> None:
        nonlocal done
        if not done:
            action()
            done = True

    return run


def _raw_body(raw: Mapping[str, Any]) -> bytes:
    body = raw.get("body") or ""
    if raw.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidRequest("the request body is not valid base64") from exc
    return body.encode("utf-8", "surrogatepass")


def _json_or_none(body: bytes, read_json: Callable[[str], Any]) -> Any:
    try:
        return read_json(body.decode("utf-8"))
    except ValueError:  # incl. JSONDecodeError, UnicodeDecodeError: validation says 400
        return None
