"""Signed requests and permissions, case by case: each refused request gets its status and
code, and leaves every table (but the nonces) and the bucket exactly as they were.

Authentication (401): unsigned, garbled, wrong secret, unknown / disabled / deleted key,
tampered body / path / query / method, expired and future dates, a replay. Permissions
(403): every boundary of an admin, a producer and two consumers, including acks of receipt
handles for a topic or group the key may not consume. The module prints its tally.
"""

from __future__ import annotations

import collections
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from api_helpers import (
    b64,
    broker_now,
    make_topic,
    narrow_keys,
    new_key,
    receive,
    send,
    signed_client,
    stored_state,
)
from cirrusmq.credentials import Credentials
from cirrusmq.signing import sign
from cirrusmq_broker.rules.retries import RETRY_TOPIC_QUEUES

TALLY: collections.Counter[str] = collections.Counter()


@dataclass
class World:
    stack: object
    topic: str
    other_topic: str
    message_id: str
    handles: list[str]
    """Receipt handles of group ``billing`` on ``topic`` (in flight, one hour)."""
    keys: dict[str, Credentials]


def check_once(stack) -> None:
    """One pass of the transaction back-checker (the scheduled run would loop through its
    minute while a check falls due within it)."""
    stack.invoke("TxnCheckerFunction", {"task": "check", "loop_seconds": 0})


@pytest.fixture(scope="module")
def world(cirrusmq_stack) -> World:
    topic, other = f"orders-{uuid.uuid4().hex[:6]}", f"audit-{uuid.uuid4().hex[:6]}"
    with signed_client(cirrusmq_stack) as admin:
        make_topic(admin, topic, queues=2)
        make_topic(admin, other, queues=1)
        sent = send(admin, topic, {"body": b64(b"a")}, {"body": b64(b"b")})
        send(admin, other, {"body": b64(b"c")})
        got = receive(admin, "billing", topic, max_messages=2, invisible_seconds=3600)
        keys = {
            "producer": new_key(admin, {"publish": [topic]}),
            "consumer": new_key(
                admin, {"subscribe": [{"groups": ["billing"], "topics": ["orders-*"]}]}
            ),
            "auditor": new_key(admin, {"subscribe": [{"groups": ["billing"], "topics": [other]}]}),
            "nothing": new_key(admin, {}),
            "disabled": new_key(admin, {"admin": True}),
            "deleted": new_key(admin, {"admin": True}),
        }
        assert admin.post(f"/v1/keys/{keys['disabled'].access_key}/disable").status_code == 200
        assert admin.delete(f"/v1/keys/{keys['deleted'].access_key}").status_code == 204
    keys["admin"] = cirrusmq_stack.credentials
    return World(
        cirrusmq_stack,
        topic,
        other,
        sent["receipts"][0]["message_id"],
        [m["receipt_handle"] for m in got],
        keys,
    )


# ------------------------------------------------------------------ raw requests
def raw(
    world: World,
    method: str,
    path: str,
    body: dict | None = None,
    *,
    key: str = "admin",
    secret: str | None = None,
    signed_path: str | None = None,
    signed_body: bytes | None = None,
    signed_method: str | None = None,
    skew: float = 0,
    headers: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
) -> httpx.Response:
    """Send one request, signed as ``key`` (with the given tampering) unless ``key`` is ''."""
    content = b"" if body is None else json.dumps(body).encode()
    url = httpx.URL(world.stack.endpoint + path)
    sent_headers = {"content-type": "application/json"} if body is not None else {}
    if key:
        credentials = world.keys[key]
        if secret is not None:
            credentials = Credentials(credentials.access_key, secret)
        signed_url = httpx.URL(world.stack.endpoint + (signed_path or path))
        sent_headers.update(
            sign(
                signed_method or method,
                signed_url,
                content if signed_body is None else signed_body,
                credentials,
                now=_signing_time(skew),
            )
        )
    sent_headers.update(headers or {})
    for name in drop:
        sent_headers = {k: v for k, v in sent_headers.items() if k.lower() != name.lower()}
    with httpx.Client(timeout=60) as client:
        return client.request(method, url, content=content, headers=sent_headers)


def _signing_time(skew: float) -> float:
    """Broker time, or for a skewed date one beyond the skew of both the broker's and the wall
    clock (the service accepts either: a stack's clock may have been advanced)."""
    if not skew:
        return broker_now()
    return (min if skew < 0 else max)(broker_now(), time.time()) + skew


Case = Callable[[World], httpx.Response]


def send_body(world: World) -> dict:
    return {"messages": [{"body": b64(b"intruder")}]}


AUTH_CASES: dict[str, tuple[Case, str]] = {
    "unsigned": (
        lambda w: raw(w, "POST", f"/v1/topics/{w.topic}/messages", send_body(w), key=""),
        "MissingSignature",
    ),
    "unsigned-create-topic": (
        lambda w: raw(w, "POST", "/v1/topics", {"name": "never-made"}, key=""),
        "MissingSignature",
    ),
    "unsigned-web-form-multipart": (
        lambda w: httpx.post(
            f"{w.stack.endpoint}/v1/topics",
            files={"name": (None, "never-made")},
            timeout=60,
        ),
        "MissingSignature",
    ),
    "garbled-authorization": (
        lambda w: raw(
            w, "GET", f"/v1/topics/{w.topic}", headers={"Authorization": "Basic YWRtaW46eA=="}
        ),
        "MissingSignature",
    ),
    "no-date": (
        lambda w: raw(w, "GET", f"/v1/topics/{w.topic}", drop=("X-Cirrus-Date",)),
        "MissingSignature",
    ),
    "no-nonce": (
        lambda w: raw(w, "GET", f"/v1/topics/{w.topic}", drop=("X-Cirrus-Nonce",)),
        "MissingSignature",
    ),
    "short-nonce": (
        lambda w: raw(w, "GET", f"/v1/topics/{w.topic}", headers={"X-Cirrus-Nonce": "abc"}),
        "MissingSignature",
    ),
    "wrong-secret": (
        lambda w: raw(
            w, "POST", f"/v1/topics/{w.topic}/messages", send_body(w), secret="not-the-secret"
        ),
        "InvalidSignature",
    ),
    "unknown-key": (lambda w: _unknown_key(w), "InvalidSignature"),
    "tampered-body": (
        lambda w: raw(
            w,
            "POST",
            f"/v1/topics/{w.topic}/messages",
            send_body(w),
            signed_body=json.dumps({"messages": [{"body": b64(b"ok")}]}).encode(),
        ),
        "InvalidSignature",
    ),
    "tampered-path": (
        lambda w: raw(
            w,
            "DELETE",
            f"/v1/topics/{w.topic}",
            signed_path=f"/v1/topics/{w.topic}-x",
        ),
        "InvalidSignature",
    ),
    "tampered-query": (
        lambda w: raw(
            w,
            "GET",
            f"/v1/groups/billing?topic={w.other_topic}",
            signed_path=f"/v1/groups/billing?topic={w.topic}",
            key="consumer",
        ),
        "InvalidSignature",
    ),
    "tampered-method": (
        lambda w: raw(w, "DELETE", f"/v1/topics/{w.topic}", signed_method="GET"),
        "InvalidSignature",
    ),
    "expired-date": (
        lambda w: raw(w, "POST", f"/v1/topics/{w.topic}/messages", send_body(w), skew=-330),
        "RequestExpired",
    ),
    "future-date": (
        lambda w: raw(w, "POST", f"/v1/topics/{w.topic}/messages", send_body(w), skew=+330),
        "RequestExpired",
    ),
    "disabled-key": (
        lambda w: raw(w, "POST", "/v1/topics", {"name": "never-made"}, key="disabled"),
        "InvalidSignature",
    ),
    "deleted-key": (
        lambda w: raw(w, "POST", "/v1/topics", {"name": "never-made"}, key="deleted"),
        "InvalidSignature",
    ),
}


def _unknown_key(w: World) -> httpx.Response:
    w.keys.setdefault("unknown", Credentials("CMQAAAAAAAAAAAAAAAAA", "whatever-secret"))
    return raw(w, "POST", "/v1/topics", {"name": "never-made"}, key="unknown")


def _forbidden(key: str, method: str, path: str, body: Callable[[World], dict] | None = None):
    def case(w: World) -> httpx.Response:
        real = path.format(t=w.topic, o=w.other_topic, m=w.message_id, a=w.keys["admin"])
        return raw(w, method, real, body(w) if body else None, key=key)

    return case


def step_body(w: World) -> dict:
    """An exactly-once step of group billing sending one message to the producer's topic."""
    return {
        "transactional_id": "stage-1",
        "epoch": 1,
        "sequence": 0,
        "group": "billing",
        "outputs": [{"topic": w.topic, "messages": [{"body": b64(b"x")}]}],
    }


def _ack(key: str, group: str) -> Case:
    return _forbidden(
        key, "POST", f"/v1/groups/{group}/ack", lambda w: {"receipt_handles": w.handles}
    )


def _invisible(key: str, group: str) -> Case:
    return _forbidden(
        key,
        "POST",
        f"/v1/groups/{group}/invisible",
        lambda w: {"receipt_handle": w.handles[0], "invisible_seconds": 60},
    )


FORBIDDEN: dict[str, Case] = {
    # a producer cannot read, consume, administer, or publish elsewhere
    "producer-create-topic": _forbidden("producer", "POST", "/v1/topics", lambda w: {"name": "x1"}),
    "producer-delete-topic": _forbidden("producer", "DELETE", "/v1/topics/{t}"),
    "producer-send-other-topic": _forbidden(
        "producer", "POST", "/v1/topics/{o}/messages", send_body
    ),
    "producer-receive": _forbidden(
        "producer", "POST", "/v1/groups/billing/receive", lambda w: {"topic": w.topic}
    ),
    "producer-lookup": _forbidden("producer", "GET", "/v1/topics/{t}/messages/{m}"),
    "producer-ack": _ack("producer", "billing"),
    "producer-invisible": _invisible("producer", "billing"),
    "producer-describe-group": _forbidden("producer", "GET", "/v1/groups/billing"),
    "producer-subscribe": _forbidden(
        "producer", "PUT", "/v1/groups/billing/subscriptions/{t}", lambda w: {"filter": "A"}
    ),
    "producer-describe-other-topic": _forbidden("producer", "GET", "/v1/topics/{o}"),
    "producer-list-keys": _forbidden("producer", "GET", "/v1/keys"),
    "producer-create-key": _forbidden(
        "producer", "POST", "/v1/keys", lambda w: {"permissions": {"admin": True}}
    ),
    # a consumer cannot publish, consume as another group or from another topic, administer
    "consumer-send": _forbidden("consumer", "POST", "/v1/topics/{t}/messages", send_body),
    "consumer-receive-as-other-group": _forbidden(
        "consumer", "POST", "/v1/groups/shipping/receive", lambda w: {"topic": w.topic}
    ),
    "consumer-receive-other-topic": _forbidden(
        "consumer", "POST", "/v1/groups/billing/receive", lambda w: {"topic": w.other_topic}
    ),
    "consumer-ack-as-other-group": _ack("consumer", "shipping"),
    "consumer-invisible-as-other-group": _invisible("consumer", "shipping"),
    "consumer-subscribe-other-topic": _forbidden(
        "consumer", "PUT", "/v1/groups/billing/subscriptions/{o}", lambda w: {"filter": "A"}
    ),
    "consumer-describe-other-group": _forbidden("consumer", "GET", "/v1/groups/shipping"),
    "consumer-lookup-other-topic": _forbidden("consumer", "GET", "/v1/topics/{o}/messages/{m}"),
    "consumer-delete-topic": _forbidden("consumer", "DELETE", "/v1/topics/{t}"),
    "consumer-disable-admin": _forbidden("consumer", "POST", "/v1/keys/{a.access_key}/disable"),
    # the auditor may consume as billing, but only the other topic: the handles are not its
    "auditor-invisible-foreign-topic-handle": _invisible("auditor", "billing"),
    # consumer registration: as its own groups and topics only
    "producer-heartbeat": _forbidden(
        "producer", "POST", "/v1/groups/billing/heartbeat", lambda w: {"client_id": "c1"}
    ),
    "consumer-heartbeat-as-other-group": _forbidden(
        "consumer", "POST", "/v1/groups/shipping/heartbeat", lambda w: {"client_id": "c1"}
    ),
    "consumer-heartbeat-other-topic": _forbidden(
        "consumer",
        "POST",
        "/v1/groups/billing/heartbeat",
        lambda w: {"client_id": "c1", "subscriptions": {w.other_topic: "*"}},
    ),
    "consumer-deregister-in-other-group": _forbidden(
        "consumer", "DELETE", "/v1/groups/shipping/consumers/c1"
    ),
    # an exactly-once step: publish on each output topic, consume each handle's topic
    "producer-step-acks-handles-of-a-group-it-may-not-consume-as": _forbidden(
        "producer",
        "POST",
        "/v1/producer-groups/pg/steps",
        lambda w: {**step_body(w), "receipt_handles": w.handles},
    ),
    "producer-step-sends-to-a-topic-it-may-not-publish-to": _forbidden(
        "producer",
        "POST",
        "/v1/producer-groups/pg/steps",
        lambda w: {
            **step_body(w),
            "outputs": [{"topic": w.other_topic, "messages": [{"body": b64(b"x")}]}],
        },
    ),
    "consumer-step": _forbidden(
        "consumer",
        "POST",
        "/v1/producer-groups/pg/steps",
        lambda w: {**step_body(w), "receipt_handles": w.handles},
    ),
    # no permissions at all
    "nothing-describe-topic": _forbidden("nothing", "GET", "/v1/topics/{t}"),
    "nothing-delete-key": _forbidden("nothing", "DELETE", "/v1/keys/{a.access_key}"),
}


def check_refused(world: World, name: str, case: Case, status: int, code: str) -> None:
    before = stored_state(world.stack)
    response = case(world)
    TALLY["tried"] += 1
    assert (response.status_code, response.json().get("code")) == (status, code), (
        name,
        response.text,
    )
    TALLY["rejected"] += 1
    assert "secret" not in response.json()["message"].lower()
    after = stored_state(world.stack)
    changed = before.changed(after)
    TALLY["stored"] += bool(changed)
    assert not changed, f"{name} changed {changed}"


@pytest.mark.parametrize("name", AUTH_CASES.keys())
def test_unauthenticated_requests_are_refused_and_change_nothing(world, name):
    case, code = AUTH_CASES[name]
    check_refused(world, name, case, 401, code)


@pytest.mark.parametrize("name", FORBIDDEN.keys())
def test_each_permission_boundary_is_403_and_changes_nothing(world, name):
    check_refused(world, name, FORBIDDEN[name], 403, "AccessDenied")


def test_a_replayed_request_is_refused_and_changes_nothing(world):
    url = httpx.URL(f"{world.stack.endpoint}/v1/topics/{world.topic}/messages")
    content = json.dumps(send_body(world)).encode()
    headers = {"content-type": "application/json"}
    headers.update(sign("POST", url, content, world.keys["producer"], now=broker_now()))
    first = httpx.post(url, content=content, headers=headers, timeout=60)
    assert first.status_code == 200, first.text
    check_refused(
        world,
        "replayed",
        lambda w: httpx.post(url, content=content, headers=headers, timeout=60),
        401,
        "ReplayedRequest",
    )


def test_a_key_cannot_disable_or_delete_itself(world):
    me = world.keys["admin"].access_key
    check_refused(
        world,
        "self-disable",
        _forbidden("admin", "POST", f"/v1/keys/{me}/disable"),
        409,
        "KeyInUse",
    )
    check_refused(
        world, "self-delete", _forbidden("admin", "DELETE", f"/v1/keys/{me}"), 409, "KeyInUse"
    )
    check_refused(  # a disabled key still cached elsewhere must not revive itself
        world, "self-enable", _forbidden("admin", "POST", f"/v1/keys/{me}/enable"), 409, "KeyInUse"
    )


def test_describing_a_group_shows_only_topics_the_key_may_consume(world):
    """The auditor consumes only the other topic as billing: billing's offsets and filter on
    the first topic stay hidden, and asking for that topic by name is refused."""
    check_refused(
        world,
        "describe-foreign-topic",
        _forbidden("auditor", "GET", f"/v1/groups/billing?topic={world.topic}"),
        403,
        "AccessDenied",
    )
    with signed_client(world.stack, world.keys["auditor"]) as auditor:
        described = auditor.get("/v1/groups/billing").json()
    assert {q["topic"] for q in described["queues"]} <= {world.other_topic}
    assert {s["topic"] for s in described["subscriptions"]} <= {world.other_topic}


OPEN_ROUTES = {
    ("GET", "/v1/health"): 200,
    ("GET", "/v1/openapi.json"): 200,
    # the web console's static files (its pages sign their own API calls)
    ("GET", "/"): 302,  # to the console
    ("GET", "/console"): 200,
    ("GET", "/console/{name}"): 200,
}
"""The routes anyone may call, and their answer."""
SQS_ROUTES = {
    ("POST", "/"): 403,
    ("POST", "/{account_id}/{queue_name}"): 403,
    ("GET", "/{account_id}/{queue_name}"): 403,
}
"""The SQS API's routes answer an unsigned request with SQS's own MissingAuthenticationToken
(403), as SQS does."""


def test_every_route_of_every_function_needs_a_signature(world):
    """Guards deny-by-default against a route added without the check (or with request
    validation switched off, which the check rides on)."""
    routes = [
        (route.method, route.path)
        for runtime in world.stack.functions.values()
        for route in runtime.function.http_routes
    ]
    assert len(routes) >= 16
    for method, path in routes:
        concrete = path.replace("{topic}", world.topic).replace("{group}", "billing")
        concrete = concrete.replace("{message_id}", world.message_id).replace("{access_key}", "x")
        concrete = concrete.replace("{name}", "app.js")  # a console file
        concrete = concrete.replace("{account_id}", "000000000000").replace("{queue_name}", "q")
        response = httpx.request(method, world.stack.endpoint + concrete, json={}, timeout=60)
        expected = OPEN_ROUTES.get((method, path)) or SQS_ROUTES.get((method, path), 401)
        assert response.status_code == expected, (method, path, response.text)


def test_acking_handles_of_a_topic_the_key_may_not_consume_acks_nothing(world):
    before = stored_state(world.stack)
    response = _ack("auditor", "billing")(world)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["acked"] == 0
    assert {(r["status"], r["code"]) for r in body["results"]} == {("invalid", "AccessDenied")}
    TALLY["tried"] += 1
    TALLY["rejected"] += 1
    assert stored_state(world.stack) == before


def test_what_each_key_may_do_works(world):
    """The other side of every boundary: the grants work."""
    as_ = {name: signed_client(world.stack, creds) for name, creds in world.keys.items()}
    try:
        assert (
            as_["producer"]
            .post(f"/v1/topics/{world.topic}/messages", json=send_body(world))
            .status_code
            == 200
        )
        assert [t["name"] for t in as_["producer"].get("/v1/topics").json()["topics"]] == [
            world.topic
        ]
        assert as_["nothing"].get("/v1/topics").json() == {"topics": []}
        assert (
            as_["consumer"].get(f"/v1/topics/{world.topic}/messages/{world.message_id}").status_code
            == 200
        )
        assert as_["consumer"].get("/v1/groups/billing").status_code == 200
        got = as_["consumer"].post(
            "/v1/groups/billing/receive", json={"topic": world.topic, "max_messages": 1}
        )
        assert got.status_code == 200, got.text
        acked = (
            as_["consumer"]
            .post("/v1/groups/billing/ack", json={"receipt_handles": world.handles})
            .json()
        )
        assert acked["acked"] == len(world.handles), acked
        assert (
            as_["auditor"]
            .post("/v1/groups/billing/receive", json={"topic": world.other_topic})
            .status_code
            == 200
        )
    finally:
        for client in as_.values():
            client.close()


# ------------------------------------------- transactions
def test_a_transactional_registration_belongs_to_the_key_that_made_it(world):
    """A key with a publish grant elsewhere cannot fence another key's producer, poll its
    checks (bodies of a topic it may not read), end its transactions or send with it."""
    pay, pg = f"pay-{uuid.uuid4().hex[:6]}", f"pg-{uuid.uuid4().hex[:6]}"
    with signed_client(world.stack) as admin:
        make_topic(admin, pay, queues=1, message_type="TRANSACTION")
        world.keys["tx-owner"] = new_key(admin, {"publish": [pay]})
        world.keys["tx-intruder"] = new_key(admin, {"publish": [world.other_topic]})
    base = f"/v1/producer-groups/{pg}"
    who = {"transactional_id": "svc-1"}
    registered = raw(world, "POST", f"{base}/producers", who, key="tx-owner")
    assert registered.status_code == 200, registered.text
    epoch = registered.json()["epoch"]
    message = {"body": b64(b"secret")}
    sent = raw(
        world,
        "POST",
        f"{base}/transactions/t1/messages",
        {"topic": pay, **who, "epoch": epoch, "messages": [message], "check_immunity_seconds": 0},
        key="tx-owner",
    )
    assert sent.status_code == 200, sent.text
    refused = [
        raw(world, "POST", f"{base}/producers", who, key="tx-intruder"),
        raw(world, "POST", f"{base}/checks", {**who, "epoch": epoch}, key="tx-intruder"),
        raw(
            world,
            "POST",
            f"{base}/transactions/t1/end",
            {"resolution": "ROLLBACK", **who, "epoch": epoch},
            key="tx-intruder",
        ),
    ]
    assert [(r.status_code, r.json()["code"]) for r in refused] == [(403, "AccessDenied")] * 3
    again = raw(world, "POST", f"{base}/producers", who, key="tx-owner")
    assert again.json()["epoch"] == epoch + 1  # the intruder did not fence it
    ended = raw(
        world,
        "POST",
        f"{base}/transactions/t1/end",
        {"resolution": "COMMIT", **who, "epoch": epoch + 1},
        key="tx-owner",
    )
    assert ended.status_code == 200 and ended.json()["state"] == "COMMITTED", ended.text


# ------------------------------------------ inside a producer group or a consumer group
@pytest.fixture(scope="module")
def pay_group(world) -> dict:
    """Producer group ``pg`` on TRANSACTION topic ``pay``: key ``pay-a`` registered ``txA``
    and sent transaction ``t2`` (checked at once); ``pay-b`` (publish on ``pay`` only)
    registered ``txB`` in the same group; ``pay-reader`` (publish and subscribe on ``pay``)
    registered ``txR``. The checker has asked the group about ``t2`` once."""
    pay, pg = f"pay-{uuid.uuid4().hex[:6]}", f"pg-{uuid.uuid4().hex[:6]}"
    with signed_client(world.stack) as admin:
        make_topic(admin, pay, queues=1, message_type="TRANSACTION")
        world.keys["pay-a"] = new_key(admin, {"publish": [pay]})
        world.keys["pay-b"] = new_key(admin, {"publish": [pay]})
        world.keys["pay-reader"] = new_key(
            admin, {"publish": [pay], "subscribe": [{"groups": ["any"], "topics": [pay]}]}
        )
    base = f"/v1/producer-groups/{pg}"
    epochs = {}
    for key, tid in (("pay-a", "txA"), ("pay-b", "txB"), ("pay-reader", "txR")):
        registered = raw(world, "POST", f"{base}/producers", {"transactional_id": tid}, key=key)
        assert registered.status_code == 200, registered.text
        epochs[tid] = registered.json()["epoch"]
    sent = raw(
        world,
        "POST",
        f"{base}/transactions/t2/messages",
        {
            "topic": pay,
            "transactional_id": "txA",
            "epoch": epochs["txA"],
            "messages": [{"body": b64(b"card 4242")}],
            "check_immunity_seconds": 0,
            "check_interval_seconds": 3600,  # the checker's run ends after one check
        },
        key="pay-a",
    )
    assert sent.status_code == 200, sent.text
    check_once(world.stack)  # t2 checked once
    return {"pay": pay, "base": base, "epochs": epochs}


def _end(pay_group: dict, tid: str, resolution: str, **extra) -> Callable[[World], httpx.Response]:
    body = {"resolution": resolution, "transactional_id": tid, "epoch": pay_group["epochs"][tid]}
    key = {"txA": "pay-a", "txB": "pay-b", "txR": "pay-reader"}[tid]
    return lambda w: raw(
        w, "POST", f"{pay_group['base']}/transactions/t2/end", {**body, **extra}, key=key
    )


def _poll(pay_group: dict, tid: str) -> Callable[[World], httpx.Response]:
    body = {"transactional_id": tid, "epoch": pay_group["epochs"][tid], "max_checks": 32}
    key = {"txA": "pay-a", "txB": "pay-b", "txR": "pay-reader"}[tid]
    return lambda w: raw(w, "POST", f"{pay_group['base']}/checks", body, key=key)


def test_another_producer_of_the_group_cannot_end_a_transaction(world, pay_group):
    """Only the producer that owns a transaction ends it; another one (another key with
    publish on the topic) is refused for COMMIT, ROLLBACK, and a check's answer it may not
    have been handed (it may not read the topic)."""
    for name, case in {
        "commit-others-transaction": _end(pay_group, "txB", "COMMIT"),
        "rollback-others-transaction": _end(pay_group, "txB", "ROLLBACK"),
        "answer-check-without-read": _end(pay_group, "txB", "COMMIT", check=True),
        "reader-ends-others-transaction": _end(pay_group, "txR", "ROLLBACK"),
    }.items():
        check_refused(world, name, case, 403, "AccessDenied")


def test_a_check_request_goes_only_to_a_producer_that_may_read_it(world, pay_group):
    """B (publish only) gets no check of A's transaction (it carries A's first message), and
    its poll claims nothing; A's own producer gets it."""
    before = stored_state(world.stack)
    polled = _poll(pay_group, "txB")(world)
    TALLY["tried"] += 1
    assert polled.status_code == 200, polled.text
    assert polled.json()["checks"] == [], polled.text  # no body of A's
    TALLY["rejected"] += 1
    assert stored_state(world.stack) == before  # not claimed: A gets it at once
    mine = _poll(pay_group, "txA")(world)
    assert [c["transaction_id"] for c in mine.json()["checks"]] == ["t2"], mine.text
    assert mine.json()["checks"][0]["message"]["body"] == b64(b"card 4242")


def test_the_owner_ends_its_transaction_after_the_refusals(world, pay_group):
    ended = _end(pay_group, "txA", "ROLLBACK")(world)
    assert (ended.status_code, ended.json()["state"]) == (200, "ROLLED_BACK"), ended.text


def test_a_reader_of_the_topic_may_answer_a_check_as_rocketmq_allows(world):
    """Any producer of the group may answer a check (RocketMQ's rule) when it may read the
    transaction's topic: the reader's poll gets another producer's check and commits it."""
    pay, pg = f"pay-{uuid.uuid4().hex[:6]}", f"pg-{uuid.uuid4().hex[:6]}"
    with signed_client(world.stack) as admin:
        make_topic(admin, pay, queues=1, message_type="TRANSACTION")
        world.keys["pay2-a"] = new_key(admin, {"publish": [pay]})
        world.keys["pay2-reader"] = new_key(
            admin, {"publish": [pay], "subscribe": [{"groups": ["any"], "topics": [pay]}]}
        )
    base = f"/v1/producer-groups/{pg}"
    a = raw(world, "POST", f"{base}/producers", {"transactional_id": "a"}, key="pay2-a")
    r = raw(world, "POST", f"{base}/producers", {"transactional_id": "r"}, key="pay2-reader")
    sent = raw(
        world,
        "POST",
        f"{base}/transactions/t9/messages",
        {
            "topic": pay,
            "transactional_id": "a",
            "epoch": a.json()["epoch"],
            "messages": [{"body": b64(b"x")}],
            "check_immunity_seconds": 0,
            "check_interval_seconds": 3600,  # the checker's run ends after one check
        },
        key="pay2-a",
    )
    assert sent.status_code == 200, sent.text
    check_once(world.stack)
    who = {"transactional_id": "r", "epoch": r.json()["epoch"]}
    polled = raw(world, "POST", f"{base}/checks", who, key="pay2-reader")
    assert [c["transaction_id"] for c in polled.json()["checks"]] == ["t9"], polled.text
    answered = raw(
        world,
        "POST",
        f"{base}/transactions/t9/end",
        {"resolution": "COMMIT", "check": True, **who},
        key="pay2-reader",
    )
    assert (answered.status_code, answered.json()["state"]) == (200, "COMMITTED"), answered.text


def test_a_consumer_registration_belongs_to_the_key_that_made_it(world):
    """Another key (even one with the same grants) cannot replace or remove a live
    registration by heartbeating its client id: 409 ClientIdInUse / 403, nothing changes."""
    victim, fifo = f"victim-{uuid.uuid4().hex[:6]}", f"orders-fifo-{uuid.uuid4().hex[:6]}"
    with signed_client(world.stack) as admin:
        world.keys["consumer-twin"] = new_key(
            admin, {"subscribe": [{"groups": ["billing"], "topics": ["orders-*", "audit-*"]}]}
        )
        make_topic(admin, fifo, queues=1, message_type="FIFO")
        send(admin, fifo, {"body": b64(b"f"), "message_group": "g"})
    subscriptions = {world.topic: "*", fifo: "*"}
    registered = raw(
        world,
        "POST",
        "/v1/groups/billing/heartbeat",
        {"client_id": victim, "subscriptions": subscriptions, "orderly": True},
        key="consumer",
    )
    assert registered.status_code == 200, registered.text
    deregister = _forbidden("auditor", "DELETE", f"/v1/groups/billing/consumers/{victim}")
    check_refused(world, "deregister-others-consumer", deregister, 403, "AccessDenied")
    for name, key, topic in (
        ("heartbeat-over-others-consumer", "auditor", world.other_topic),
        ("twin-heartbeat-over-others-consumer", "consumer-twin", world.topic),
    ):
        check_refused(
            world,
            name,
            _forbidden(
                key,
                "POST",
                "/v1/groups/billing/heartbeat",
                lambda w, topic=topic: {"client_id": victim, "subscriptions": {topic: "*"}},
            ),
            409,
            "ClientIdInUse",
        )
    check_refused(  # an orderly receive as the victim would take its queue locks
        world,
        "twin-receive-as-others-consumer",
        _forbidden(
            "consumer-twin",
            "POST",
            "/v1/groups/billing/receive",
            lambda w: {"topic": fifo, "client_id": victim},
        ),
        409,
        "ClientIdInUse",
    )
    check_refused(world, "deregister-after-heartbeat", deregister, 403, "AccessDenied")
    twin_deregister = _forbidden(
        "consumer-twin", "DELETE", f"/v1/groups/billing/consumers/{victim}"
    )
    check_refused(world, "twin-deregister", twin_deregister, 403, "AccessDenied")
    with signed_client(world.stack, world.keys["consumer"]) as owner:
        [me] = [
            c
            for c in owner.get("/v1/groups/billing").json()["consumers"]
            if c["client_id"] == victim
        ]
        assert me["orderly"] is True
        assert sorted(t["topic"] for t in me["topics"]) == sorted(subscriptions)
        mine = owner.post("/v1/groups/billing/receive", json={"topic": fifo, "client_id": victim})
        assert [m["body"] for m in mine.json()["messages"]] == [b64(b"f")], mine.text
        assert owner.delete(f"/v1/groups/billing/consumers/{victim}").status_code == 204


def test_zz_tally():
    print(f"auth matrix: {dict(TALLY)}")
    assert TALLY["tried"] == TALLY["rejected"] and TALLY["stored"] == 0, TALLY


# ------------------------------------------------------------------ ownership and scopes of keys
@pytest.fixture(scope="module")
def keyed(cirrusmq_stack) -> dict:
    return narrow_keys(cirrusmq_stack)


def test_an_admin_keys_consumer_registration_belongs_to_it_too(keyed):
    """AUTH-SPEC: a consumer's client id belongs to the access key that registered it while it
    is live; another key's heartbeat or orderly receive with it is 409 ClientIdInUse, its
    deregistration 403. An admin key is an access key like any other here: it may act for
    others, but others may not act for it."""
    stack, fifo, group = keyed["stack"], keyed["fifo"], f"rv-{uuid.uuid4().hex[:6]}"
    client_id = f"admin-worker-{uuid.uuid4().hex[:6]}"
    with signed_client(stack) as admin:
        beat = admin.post(
            f"/v1/groups/{group}/heartbeat",
            json={"client_id": client_id, "subscriptions": {fifo: "*"}, "orderly": True},
        )
        assert beat.status_code == 200, beat.text
    outcomes = {}
    with signed_client(stack, keyed["consumer"]) as intruder:
        taken = intruder.post(
            f"/v1/groups/{group}/receive", json={"topic": fifo, "client_id": client_id}
        )
        outcomes["orderly-receive"] = (taken.status_code, taken.json().get("code"))
        over = intruder.post(
            f"/v1/groups/{group}/heartbeat",
            json={"client_id": client_id, "subscriptions": {fifo: "*"}, "orderly": True},
        )
        outcomes["heartbeat"] = (over.status_code, over.json().get("code"))
        gone = intruder.delete(f"/v1/groups/{group}/consumers/{client_id}")
        outcomes["deregister"] = (
            gone.status_code,
            (gone.json() or {}).get("code") if gone.content else None,
        )
    assert outcomes == {
        "orderly-receive": (409, "ClientIdInUse"),
        "heartbeat": (409, "ClientIdInUse"),
        "deregister": (403, "AccessDenied"),
    }, outcomes


# ---- producer groups
@pytest.fixture(scope="module")
def shared_pay(keyed) -> dict:
    """TRANSACTION topic ``pay``; producer group ``pg``: key ``a`` (publish) registered
    ``txA``, key ``b`` (publish) registered ``txB``, key ``r`` (publish and subscribe on pay)
    registered ``txR``."""
    stack = keyed["stack"]
    topic, pg = f"rvpay-{uuid.uuid4().hex[:6]}", f"rvpg-{uuid.uuid4().hex[:6]}"
    with signed_client(stack) as admin:
        make_topic(admin, topic, queues=1, message_type="TRANSACTION")
        keys = {
            "a": new_key(admin, {"publish": [topic]}),
            "b": new_key(admin, {"publish": [topic]}),
            "r": new_key(
                admin, {"publish": [topic], "subscribe": [{"groups": ["x"], "topics": [topic]}]}
            ),
        }
    base = f"/v1/producer-groups/{pg}"
    epochs = {}
    for key, tid in (("a", "txA"), ("b", "txB"), ("r", "txR")):
        with signed_client(stack, keys[key]) as api:
            got = api.post(f"{base}/producers", json={"transactional_id": tid})
            assert got.status_code == 200, got.text
            epochs[tid] = got.json()["epoch"]
    return {"topic": topic, "base": base, "keys": keys, "epochs": epochs, "stack": stack}


def _open_shared(shared_pay: dict, txn: str, body: bytes = b"secret", **timings) -> None:
    with signed_client(shared_pay["stack"], shared_pay["keys"]["a"]) as a:
        sent = a.post(
            f"{shared_pay['base']}/transactions/{txn}/messages",
            json={
                "topic": shared_pay["topic"],
                "transactional_id": "txA",
                "epoch": shared_pay["epochs"]["txA"],
                "messages": [{"body": b64(body)}],
                **timings,
            },
        )
        assert sent.status_code == 200, sent.text


def test_another_producer_cannot_add_a_part_to_a_transaction_it_does_not_own(keyed, shared_pay):
    """B sends a part into A's open transaction under its own id: refused, nothing stored
    (else A's commit would publish B's messages)."""
    txn = f"t-{uuid.uuid4().hex[:6]}"
    _open_shared(shared_pay, txn)
    before = stored_state(shared_pay["stack"])
    with signed_client(shared_pay["stack"], shared_pay["keys"]["b"]) as b:
        injected = b.post(
            f"{shared_pay['base']}/transactions/{txn}/messages",
            json={
                "topic": shared_pay["topic"],
                "transactional_id": "txB",
                "epoch": shared_pay["epochs"]["txB"],
                "part": 1,
                "messages": [{"body": b64(b"injected")}],
            },
        )
    assert 400 <= injected.status_code < 500, injected.text
    assert stored_state(shared_pay["stack"]) == before


def test_another_producer_answers_a_check_only_while_one_is_outstanding(keyed, shared_pay):
    """The owner is still sending parts (immunity one hour, no check issued): a reader of the
    topic in the same group 'answers a check' with COMMIT and ends it for the owner."""
    txn = f"t-{uuid.uuid4().hex[:6]}"
    _open_shared(shared_pay, txn, check_immunity_seconds=3600)
    before = stored_state(shared_pay["stack"])
    with signed_client(shared_pay["stack"], shared_pay["keys"]["r"]) as r:
        answered = r.post(
            f"{shared_pay['base']}/transactions/{txn}/end",
            json={
                "resolution": "COMMIT",
                "check": True,
                "transactional_id": "txR",
                "epoch": shared_pay["epochs"]["txR"],
            },
        )
    assert answered.status_code == 403, answered.text
    assert stored_state(shared_pay["stack"]) == before


# ------------------------------------------------------------------ idempotency stamps
def test_idempotency_is_per_access_key_so_another_key_cannot_claim_sequences(keyed):
    """A's producer sends (producer_id, 1) to its topic; a consumer of that topic reads the
    message id, learns the producer id, and with its own key sends (producer_id, 2..4) to a
    topic it may publish to. A's next sends, (producer_id, 2..4), must still be stored."""
    stack = keyed["stack"]
    victim_topic = f"rv-victim-{uuid.uuid4().hex[:6]}"
    own_topic = f"rv-own-{uuid.uuid4().hex[:6]}"
    with signed_client(stack) as admin:
        make_topic(admin, victim_topic, queues=1)
        make_topic(admin, own_topic, queues=1)
        victim = new_key(admin, {"publish": [victim_topic]})
        attacker = new_key(
            admin,
            {
                "publish": [own_topic],
                "subscribe": [{"groups": ["rv-snoop"], "topics": [victim_topic]}],
            },
        )
    producer_id = f"p-{uuid.uuid4().hex}"
    with signed_client(stack, victim) as a:
        first = a.post(
            f"/v1/topics/{victim_topic}/messages",
            json={"producer_id": producer_id, "sequence": 1, "messages": [{"body": b64(b"1")}]},
        )
        assert first.status_code == 200, first.text
    with signed_client(stack, attacker) as x:
        got = x.post("/v1/groups/rv-snoop/receive", json={"topic": victim_topic})
        [message] = got.json()["messages"]
        learnt = message["message_id"].rsplit(".", 2)[0]
        assert learnt == producer_id  # the message id names the producer
        for sequence in (2, 3, 4):
            squatted = x.post(
                f"/v1/topics/{own_topic}/messages",
                json={
                    "producer_id": learnt,
                    "sequence": sequence,
                    "messages": [{"body": b64(b"squat")}],
                },
            )
            assert squatted.status_code == 200, squatted.text
    with signed_client(stack, victim) as a:
        answers = [
            a.post(
                f"/v1/topics/{victim_topic}/messages",
                json={
                    "producer_id": producer_id,
                    "sequence": sequence,
                    "messages": [{"body": b64(str(sequence).encode())}],
                },
            )
            for sequence in (2, 3, 4)
        ]
    assert [(r.status_code, r.json().get("duplicate")) for r in answers] == [(200, False)] * 3, [
        r.text for r in answers
    ]


# ---- internal topics and half messages
def test_a_prefix_grant_does_not_reach_another_groups_retry_topic(keyed):
    """A grant on 're*' (meant for reports / revenue) must not read retry.<group>.<topic> of
    another group (offset reads, a receive as its own group, a lookup)."""
    stack = keyed["stack"]
    payments, billing = f"payments-{uuid.uuid4().hex[:6]}", f"rvbill-{uuid.uuid4().hex[:6]}"
    with signed_client(stack) as admin:
        make_topic(admin, payments, queues=1)
        send(admin, payments, {"body": b64(b"card 4242 4242")})
        [got] = admin.post(f"/v1/groups/{billing}/receive", json={"topic": payments}).json()[
            "messages"
        ]
        nacked = admin.post(
            f"/v1/groups/{billing}/nack",
            json={"receipt_handles": [got["receipt_handle"]], "delay_seconds": 0},
        )
        assert nacked.status_code == 200, nacked.text
        # a dead letter of billing redriven: in its retry topic's redrive queue (16)
        send(admin, payments, {"body": b64(b"card 5555 5555")})
        setting = admin.put(f"/v1/groups/{billing}", json={"max_delivery_attempts": 1})
        assert setting.status_code == 200, setting.text
        [dying] = admin.post(f"/v1/groups/{billing}/receive", json={"topic": payments}).json()[
            "messages"
        ]
        admin.post(
            f"/v1/groups/{billing}/nack", json={"receipt_handles": [dying["receipt_handle"]]}
        )
        redrive = admin.post(f"/v1/groups/{billing}/dead-letters/redrive", json={})
        assert redrive.json()["redriven"] == 1, redrive.text
        reporter = new_key(admin, {"subscribe": [{"groups": ["reporting"], "topics": ["re*"]}]})
    retry = f"retry.{billing}.{payments}"
    seen = []
    with signed_client(stack, reporter) as r:
        assert r.get(f"/v1/topics/{payments}/messages/{got['message_id']}").status_code == 403
        for queue in range(RETRY_TOPIC_QUEUES):  # the 16 levels and the redrive queue
            read = r.get(f"/v1/topics/{retry}/queues/{queue}/messages", params={"offset": 0})
            seen.append(read.status_code)
            if read.status_code == 200:
                seen.extend(m["body"] for m in read.json()["messages"])
        rcv = r.post("/v1/groups/reporting/receive", json={"topic": retry, "wait_seconds": 0})
        seen.append(rcv.status_code)
        if rcv.status_code == 200:
            seen.extend(m["body"] for m in rcv.json()["messages"])
        lookup = r.get(f"/v1/topics/{retry}/messages/{got['message_id']}")
        seen.append(lookup.status_code)
        if lookup.status_code == 200:
            seen.append(lookup.json().get("body"))
    assert b64(b"card 4242 4242") not in seen and 200 not in seen, seen
    assert b64(b"card 5555 5555") not in seen, seen


def test_a_reader_cannot_look_up_a_half_message_before_its_commit(keyed, shared_pay):
    """A half message (client id known) is not readable by id until committed."""
    txn, mid = f"t-{uuid.uuid4().hex[:6]}", f"half-{uuid.uuid4().hex[:6]}"
    with signed_client(shared_pay["stack"], shared_pay["keys"]["a"]) as a:
        sent = a.post(
            f"{shared_pay['base']}/transactions/{txn}/messages",
            json={
                "topic": shared_pay["topic"],
                "transactional_id": "txA",
                "epoch": shared_pay["epochs"]["txA"],
                "messages": [{"body": b64(b"uncommitted"), "message_id": mid}],
                "check_immunity_seconds": 3600,
            },
        )
        assert sent.status_code == 200, sent.text
    with signed_client(shared_pay["stack"], shared_pay["keys"]["r"]) as r:
        found = r.get(f"/v1/topics/{shared_pay['topic']}/messages/{mid}")
        read = r.get(f"/v1/topics/{shared_pay['topic']}/queues/0/messages", params={"offset": 0})
    assert found.status_code == 404, found.text
    assert b64(b"uncommitted") not in [m["body"] for m in read.json().get("messages", [])]


def test_a_fenced_reader_cannot_answer_a_check(keyed, shared_pay):
    """Epochs fence check answers too: the reader re-registers (a new instance), the old
    instance's answer with the old epoch is refused and the transaction stays open."""
    txn = f"t-{uuid.uuid4().hex[:6]}"
    _open_shared(shared_pay, txn, check_immunity_seconds=0, check_interval_seconds=3600)
    check_once(shared_pay["stack"])
    stack, base = shared_pay["stack"], shared_pay["base"]
    with signed_client(stack, shared_pay["keys"]["r"]) as r:
        old = shared_pay["epochs"]["txR"]
        newer = r.post(f"{base}/producers", json={"transactional_id": "txR"})
        assert newer.status_code == 200, newer.text
        shared_pay["epochs"]["txR"] = newer.json()["epoch"]
        before = stored_state(stack)
        stale = r.post(
            f"{base}/transactions/{txn}/end",
            json={"resolution": "COMMIT", "check": True, "transactional_id": "txR", "epoch": old},
        )
    assert stale.status_code == 409, stale.text
    assert stored_state(stack) == before
