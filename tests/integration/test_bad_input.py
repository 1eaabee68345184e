"""Every kind of bad input gets a 4xx with a stable code, and stores or changes nothing."""

from __future__ import annotations

import collections
import json
import re
import uuid

import httpx
import pytest
from api_helpers import (
    ack,
    b64,
    broker_now,
    make_topic,
    max_offsets,
    narrow_keys,
    object_keys,
    receive,
    send,
    signed_client,
    stored_state,
)
from cirrusmq.signing import sign

TALLY: collections.Counter[str] = collections.Counter()

BIG_BODY = b64(b"x" * (4 * 1024 * 1024 + 1))
ONE = [{"body": b64(b"x")}]


def send_case(messages=None, **extra):
    return ("POST", "/v1/topics/{topic}/messages", {"messages": messages or ONE, **extra})


def receive_case(**fields):
    return ("POST", "/v1/groups/grp/receive", {"topic": "{topic}", **fields})


CASES = {
    # names and unknown things
    "create-invalid-name": ("POST", "/v1/topics", {"name": "bad name!"}, 400, "InvalidTopicName"),
    "create-too-long-name": ("POST", "/v1/topics", {"name": "x" * 128}, 400, "InvalidTopicName"),
    "create-bad-type": (
        "POST",
        "/v1/topics",
        {"name": "ok", "message_type": "BOGUS"},
        400,
        "InvalidRequest",
    ),
    "create-zero-queues": (
        "POST",
        "/v1/topics",
        {"name": "ok", "queues": 0},
        400,
        "InvalidRequest",
    ),
    "create-existing": ("POST", "/v1/topics", {"name": "{topic}"}, 409, "TopicAlreadyExists"),
    "send-invalid-topic": (
        "POST",
        "/v1/topics/bad%21name/messages",
        {"messages": ONE},
        400,
        "InvalidTopicName",
    ),
    "send-unknown-topic": (
        "POST",
        "/v1/topics/nope-404/messages",
        {"messages": ONE},
        404,
        "TopicNotFound",
    ),
    "describe-unknown": ("GET", "/v1/topics/nope-404", None, 404, "TopicNotFound"),
    "delete-unknown": ("DELETE", "/v1/topics/nope-404", None, 404, "TopicNotFound"),
    "lookup-unknown-id": ("GET", "/v1/topics/{topic}/messages/none", None, 404, "MessageNotFound"),
    "unknown-route": ("GET", "/v1/nothing-here", None, 404, "RouteNotFound"),
    "wrong-method": ("PUT", "/v1/topics", {}, 405, "MethodNotAllowed"),
    # message bodies and batches
    "empty-body": (*send_case([{"body": ""}]), 400, "InvalidMessage"),
    "bad-base64": (*send_case([{"body": "%%%not base64"}]), 400, "InvalidMessage"),
    "oversize-body": (*send_case([{"body": BIG_BODY}]), 413, "MessageTooLarge"),
    "oversize-request": (*send_case([{"body": BIG_BODY[:3_000_000]}] * 3), 413, "RequestTooLarge"),
    "no-messages": (
        "POST",
        "/v1/topics/{topic}/messages",
        {"messages": []},
        400,
        "TooManyMessages",
    ),
    "too-many-messages": (*send_case([{"body": "eA=="}] * 1001), 400, "TooManyMessages"),
    "bad-tag": (*send_case([{"body": "eA==", "tag": "a b"}]), 400, "InvalidMessage"),
    "bad-message-id": (*send_case([{"body": "eA==", "message_id": "a/b"}]), 400, "InvalidMessage"),
    "duplicate-ids": (
        *send_case([{"body": "eA==", "message_id": "d"}, {"body": "eA==", "message_id": "d"}]),
        400,
        "InvalidMessage",
    ),
    "unknown-field": (*send_case([{"body": "eA==", "colour": "red"}]), 400, "InvalidRequest"),
    "wrong-type": (*send_case([{"body": 42}]), 400, "InvalidRequest"),
    "sequence-without-producer": (*send_case(ONE, sequence=1), 400, "InvalidRequest"),
    "bad-producer-id": (*send_case(ONE, producer_id="a b", sequence=1), 400, "InvalidRequest"),
    "negative-sequence": (*send_case(ONE, producer_id="p", sequence=-1), 400, "InvalidRequest"),
    "huge-sequence": (*send_case(ONE, producer_id="p", sequence=2**63), 400, "InvalidRequest"),
    "born-after-year-9999": (
        *send_case([{"body": "eA==", "born_timestamp": 253_402_300_800_000}]),
        400,
        "InvalidMessage",
    ),
    "newline-in-topic-name": ("POST", "/v1/topics", {"name": "x\n"}, 400, "InvalidTopicName"),
    "group-describe-bad-topic": (
        "GET",
        "/v1/groups/grp?topic=bad%21",
        None,
        400,
        "InvalidTopicName",
    ),
    # receive parameters
    "receive-invalid-group": (
        "POST",
        "/v1/groups/bad%20group/receive",
        {"topic": "{topic}"},
        400,
        "InvalidGroupName",
    ),
    "receive-unknown-topic": (*receive_case(topic="nope-404"), 404, "TopicNotFound"),
    "receive-invisible-too-short": (*receive_case(invisible_seconds=9), 400, "InvalidDuration"),
    "receive-invisible-too-long": (*receive_case(invisible_seconds=43_201), 400, "InvalidDuration"),
    "receive-wait-too-long": (*receive_case(wait_seconds=21), 400, "InvalidDuration"),
    "receive-negative-wait": (*receive_case(wait_seconds=-1), 400, "InvalidDuration"),
    "receive-zero-messages": (*receive_case(max_messages=0), 400, "InvalidRequest"),
    "receive-too-many-messages": (*receive_case(max_messages=1001), 400, "InvalidRequest"),
    "receive-bad-filter": (*receive_case(filter="A ||"), 400, "InvalidFilterExpression"),
    "receive-bad-sql-filter": (
        *receive_case(filter="a > 'x'", filter_type="SQL92"),
        400,
        "InvalidFilterExpression",
    ),
    "receive-unknown-filter-type": (
        *receive_case(filter="a > 1", filter_type="SQL"),
        400,
        "InvalidRequest",
    ),
    "subscribe-bad-sql-filter": (
        "PUT",
        "/v1/groups/grp/subscriptions/{topic}",
        {"filter": "a IN (1)", "filter_type": "SQL92"},
        400,
        "InvalidFilterExpression",
    ),
    "receive-missing-topic": ("POST", "/v1/groups/grp/receive", {}, 400, "InvalidRequest"),
    # ack and invisible
    "ack-empty": ("POST", "/v1/groups/grp/ack", {"receipt_handles": []}, 400, "InvalidRequest"),
    "ack-too-many": (
        "POST",
        "/v1/groups/grp/ack",
        {"receipt_handles": ["x"] * 1001},
        400,
        "InvalidRequest",
    ),
    "invisible-forged": (
        "POST",
        "/v1/groups/grp/invisible",
        {"receipt_handle": "x.y", "invisible_seconds": 30},
        400,
        "InvalidReceiptHandle",
    ),
}


@pytest.fixture(scope="module")
def shared_topic(cirrusmq_stack) -> str:
    with signed_client(cirrusmq_stack) as client:
        make_topic(client, "bad-input-target", queues=2)
    return "bad-input-target"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_is_refused_and_stores_nothing(api, cirrusmq_stack, shared_topic, case):
    method, path, body, status, code = case
    path = path.replace("{topic}", shared_topic)
    if isinstance(body, dict):
        body = {k: shared_topic if v == "{topic}" else v for k, v in body.items()}
    response = api.request(method, path, json=body)
    assert response.status_code == status, response.text
    error = response.json()
    assert error["code"] == code and error["message"]
    assert max_offsets(api, shared_topic) == [0, 0]
    assert object_keys(cirrusmq_stack, shared_topic) == []
    assert "grp" not in [g for g in api.get("/v1/groups/grp").json()["queues"]]


def test_malformed_json(api, shared_topic):
    response = api.post(
        f"/v1/topics/{shared_topic}/messages",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()["code"]) == (400, "InvalidRequest")
    assert max_offsets(api, shared_topic) == [0, 0]


def test_lone_surrogate_escape_in_json(api, shared_topic):
    body = json.dumps({"messages": [{"body": "eA==", "tag": "\ud800"}]})  # ASCII: "\\ud800"
    response = api.post(
        f"/v1/topics/{shared_topic}/messages",
        content=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()["code"]) == (400, "InvalidMessage")
    assert max_offsets(api, shared_topic) == [0, 0]


def test_body_that_is_not_utf8(api, shared_topic):
    response = api.post(
        f"/v1/topics/{shared_topic}/messages",
        content=b"\xff\xfe{",
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()["code"]) == (400, "InvalidRequest")
    assert max_offsets(api, shared_topic) == [0, 0]


def test_foreign_receipt_handle_changes_nothing(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"x")})
    got = receive(api, "owner", topic_name)
    response = ack(api, "intruder", got)
    assert response.status_code == 200  # per-handle outcomes: this one is refused
    assert response.json()["acked"] == 0
    assert [(r["status"], r["code"]) for r in response.json()["results"]] == [
        ("invalid", "ForeignReceiptHandle")
    ]
    invisible = api.post(
        "/v1/groups/intruder/invisible",
        json={"receipt_handle": got[0]["receipt_handle"], "invisible_seconds": 30},
    )
    assert (invisible.status_code, invisible.json()["code"]) == (400, "ForeignReceiptHandle")
    [queue] = api.get("/v1/groups/owner").json()["queues"]
    assert queue["inflight"] == 1
    assert api.get("/v1/groups/intruder").json()["queues"] == []


def test_a_forged_handle_is_reported_and_acks_nothing(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"x")})
    got = receive(api, "grp", topic_name)
    response = api.post("/v1/groups/grp/ack", json={"receipt_handles": ["forged.handle"]})
    assert response.status_code == 200
    assert [(r["status"], r["code"]) for r in response.json()["results"]] == [
        ("invalid", "InvalidReceiptHandle")
    ]
    [queue] = api.get("/v1/groups/grp").json()["queues"]
    assert queue["inflight"] == len(got) == 1


def test_fifo_topic_needs_message_group(api, topic_name):
    make_topic(api, topic_name, message_type="FIFO", queues=2)
    response = api.post(f"/v1/topics/{topic_name}/messages", json={"messages": ONE})
    assert (response.status_code, response.json()["code"]) == (400, "MessageGroupRequired")
    assert max_offsets(api, topic_name) == [0, 0]


def test_openapi_and_health(api):
    spec = api.get("/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert "/v1/topics/{topic}/messages" in spec["paths"]
    assert "/v1/groups/{group}/receive" in spec["paths"]
    assert api.get("/v1/health").json()["status"] == "ok"


def raw_post(api, path: str, body: bytes, content_type: str | None):
    headers = {} if content_type is None else {"content-type": content_type}
    return api.post(path, content=body, headers=headers)


NOT_JSON_TYPES = [
    None,
    "multipart/form-data; boundary=xyz",
    "application/x-www-form-urlencoded",
    "text/plain",
    "text/plain; charset=utf-8",
    "application/vnd.api+json",
    "application/merge-patch+json; charset=utf-8",
    "application/xml",
    "image/png",
    "*/*",
    "application/*",
    "text/html",
    "not a media type",
]
"""A signed API takes application/json only: no form or multipart post from a web page,
no text/plain (what a browser sends without a preflight), no body without a type."""


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_body_that_is_not_application_json_is_415(api, cirrusmq_stack, shared_topic, content_type):
    body = json.dumps({"messages": ONE}).encode()
    response = raw_post(api, f"/v1/topics/{shared_topic}/messages", body, content_type)
    assert (response.status_code, response.json()["code"]) == (415, "UnsupportedMediaType")
    assert max_offsets(api, shared_topic) == [0, 0]
    assert object_keys(cirrusmq_stack, shared_topic) == []
    created = raw_post(api, "/v1/topics", b'{"name": "never-created-415"}', content_type)
    assert created.status_code == 415
    assert api.get("/v1/topics/never-created-415").status_code == 404


JSON_TYPES = [
    "application/json",
    "application/json; charset=UTF-8",
    "application/json;charset=utf-8",
    "Application/JSON",
]


@pytest.mark.parametrize("content_type", JSON_TYPES)
def test_application_json_with_any_parameters_is_read(api, topic_name, content_type):
    created = raw_post(api, "/v1/topics", json.dumps({"name": topic_name}).encode(), content_type)
    assert created.status_code == 201, created.text
    sent = raw_post(
        api,
        f"/v1/topics/{topic_name}/messages",
        json.dumps({"messages": ONE}).encode(),
        content_type,
    )
    assert sent.status_code == 200, sent.text
    bad = raw_post(api, f"/v1/topics/{topic_name}/messages", b"messages=x", content_type)
    assert (bad.status_code, bad.json()["code"]) == (400, "InvalidRequest")


ODD_BODIES = {
    "int-of-5000-digits": b'{"messages": [{"body": "eA==", "born_timestamp": 1'
    + b"0" * 4999
    + b"}]}",
    "sequence-of-5000-digits": b'{"producer_id": "p", "sequence": '
    + b"9" * 5000
    + b', "messages": []}',
    "nested-100000-deep": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "nested-objects-100000-deep": b'{"messages": [{"body": "eA==", "properties": '
    + b'{"a": ' * 100_000
    + b"1"
    + b"}" * 100_000
    + b"}]}",
    "nan": b'{"messages": [{"body": "eA==", "born_timestamp": NaN}]}',
    "infinity": b'{"producer_id": "p", "sequence": Infinity, "messages": []}',
}


@pytest.mark.parametrize("body", ODD_BODIES.values(), ids=ODD_BODIES.keys())
def test_odd_json_is_invalid_request(api, cirrusmq_stack, shared_topic, body):
    response = raw_post(api, f"/v1/topics/{shared_topic}/messages", body, "application/json")
    assert (response.status_code, response.json()["code"]) == (400, "InvalidRequest")
    assert max_offsets(api, shared_topic) == [0, 0]
    assert object_keys(cirrusmq_stack, shared_topic) == []


@pytest.mark.parametrize("path", ["/v1/groups/grp/receive", "/v1/groups/grp/ack", "/v1/topics"])
def test_odd_json_on_other_routes(api, path):
    deep = b"[" * 100_000 + b"]" * 100_000
    big = b'{"topic": ' + b"7" * 5000 + b"}"
    for body in (deep, big):
        response = raw_post(api, path, body, "application/json")
        assert (response.status_code, response.json()["code"]) == (400, "InvalidRequest")


# ------------------------------------------- strict types, empty values, lone surrogates
def _send(**extra):
    return ("POST", "/v1/topics/{topic}/messages", {"messages": ONE, **extra})


def _message(**fields):
    return ("POST", "/v1/topics/{topic}/messages", {"messages": [{"body": "eA==", **fields}]})


def _receive(**fields):
    return ("POST", "/v1/groups/grp/receive", {"topic": "{topic}", **fields})


def _heartbeat(**fields):
    return ("POST", "/v1/groups/grp/heartbeat", {"client_id": "c1", **fields})


def _subscribe(value):
    return ("PUT", "/v1/groups/grp/subscriptions/{topic}", {"filter": value})


def _reset(**fields):
    return ("POST", "/v1/groups/grp/offsets/{topic}/reset", fields)


_TXN = "/v1/producer-groups/pg-bad"
ILL_TYPED = {
    # a boolean is not an integer
    "create-queues-true": ("POST", "/v1/topics", {"name": "never-made", "queues": True}),
    "create-retention-true": (
        "POST",
        "/v1/topics",
        {"name": "never-made", "retention_hours": True},
    ),
    "send-sequence-true": _send(producer_id="p-bad", sequence=True),
    "send-born-true": _message(born_timestamp=True),
    "send-delay-level-true": _message(delay_level=True),
    "receive-max-messages-true": _receive(max_messages=True),
    "receive-wait-true": _receive(wait_seconds=True),
    "heartbeat-timeout-true": _heartbeat(heartbeat_timeout_seconds=True),
    "reset-offsets-true": _reset(to="offset", offsets={"0": True}),
    "invisible-seconds-true": (
        "POST",
        "/v1/groups/grp/invisible",
        {"receipt_handle": "x.y", "invisible_seconds": True},
    ),
    "txn-end-epoch-true": (
        "POST",
        f"{_TXN}/transactions/t1/end",
        {"resolution": "ROLLBACK", "transactional_id": "a", "epoch": True},
    ),
    "txn-poll-max-checks-true": (
        "POST",
        f"{_TXN}/checks",
        {"transactional_id": "a", "epoch": 1, "max_checks": True},
    ),
    # a string is not a number
    "create-queues-string": ("POST", "/v1/topics", {"name": "never-made", "queues": "2"}),
    "send-sequence-string": _send(producer_id="p-bad", sequence="1"),
    "send-delay-level-string": _message(delay_level="1"),
    "send-delivery-string": _message(delivery_timestamp="1"),
    "receive-invisible-string": _receive(invisible_seconds="60"),
    "receive-wait-string": _receive(wait_seconds="1"),
    "reset-timestamp-string": _reset(to="timestamp", timestamp="1"),
    "reset-offsets-string": _reset(to="offset", offsets={"0": "5"}),
    "txn-half-part-string": (
        "POST",
        f"{_TXN}/transactions/t1/messages",
        {"topic": "{topic}", "transactional_id": "a", "epoch": 1, "part": "0", "messages": ONE},
    ),
    # a fraction is not an integer, a number is not a string
    "create-queues-float": ("POST", "/v1/topics", {"name": "never-made", "queues": 2.0}),
    "send-sequence-float": _send(producer_id="p-bad", sequence=1.0),
    "key-description-number": (
        "POST",
        "/v1/keys",
        {"permissions": {"publish": ["x"]}, "description": 7},
    ),
}
"""Each value would have been coerced (true -> 1, "1" -> 1, 2.0 -> 2): strict mode refuses."""

EMPTY_OR_BROKEN_TEXT = {
    "subscribe-empty-filter": (*_subscribe(""), "InvalidFilterExpression"),
    "subscribe-blank-filter": (*_subscribe(" "), "InvalidFilterExpression"),
    "subscribe-newline-filter": (*_subscribe("\n"), "InvalidFilterExpression"),
    "subscribe-lone-surrogate": (*_subscribe("\ud800"), "InvalidFilterExpression"),
    "receive-empty-filter": (*_receive(filter=""), "InvalidFilterExpression"),
    "receive-lone-surrogate": (*_receive(filter="A || \udfff"), "InvalidFilterExpression"),
    "heartbeat-empty-filter": (
        *_heartbeat(subscriptions={"{topic}": " "}),
        "InvalidFilterExpression",
    ),
    "heartbeat-lone-surrogate": (
        *_heartbeat(subscriptions={"{topic}": "\ud800"}),
        "InvalidFilterExpression",
    ),
    "send-empty-message-id": (*_message(message_id=""), "InvalidMessage"),
    "send-empty-message-group": (*_message(message_group=""), "InvalidMessage"),
    "send-lone-surrogate-group": (*_message(message_group="g\ud800"), "InvalidMessage"),
    "send-lone-surrogate-property": (*_message(properties={"k": "\udc00"}), "InvalidMessage"),
    "key-description-lone-surrogate": (
        "POST",
        "/v1/keys",
        {"permissions": {"publish": ["x"]}, "description": "\ud800"},
        "InvalidRequest",
    ),
}
"""Empty values the docs refuse, and text that cannot be stored as UTF-8: 400, never 5xx."""


def _fill(value, topic: str):
    if isinstance(value, dict):
        return {_fill(k, topic): _fill(v, topic) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, topic) for v in value]
    return topic if value == "{topic}" else value


def _refused_and_nothing_stored(api, stack, topic, method, path, body, code):
    before = stored_state(stack)
    response = api.request(  # ASCII JSON: a lone surrogate travels as its escape
        method,
        path.replace("{topic}", topic),
        content=json.dumps(_fill(body, topic)).encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == code, response.text
    assert stored_state(stack) == before
    TALLY["malformed"] += 1


@pytest.mark.parametrize("case", ILL_TYPED.values(), ids=ILL_TYPED.keys())
def test_ill_typed_values_are_refused_in_strict_mode(api, cirrusmq_stack, shared_topic, case):
    _refused_and_nothing_stored(api, cirrusmq_stack, shared_topic, *case, "InvalidRequest")


@pytest.mark.parametrize("case", EMPTY_OR_BROKEN_TEXT.values(), ids=EMPTY_OR_BROKEN_TEXT.keys())
def test_empty_values_and_lone_surrogates_are_400(api, cirrusmq_stack, shared_topic, case):
    _refused_and_nothing_stored(api, cirrusmq_stack, shared_topic, *case)


def test_the_openapi_document_types_what_strict_mode_checks(api):
    """The document says integer / number / boolean / string: a JSON Schema validator (and
    schemathesis) reads true as no integer and "1" as no number, as the service does."""
    schemas = api.get("/v1/openapi.json").json()["components"]["schemas"]

    def field(schema: str, name: str) -> dict:
        prop = schemas[schema]["properties"][name]
        return next((p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"), prop)

    assert field("CreateTopicRequest", "queues")["type"] == "integer"
    assert field("SendRequest", "sequence")["type"] == "integer"
    assert field("MessageIn", "delay_level")["type"] == "integer"
    assert field("ReceiveRequest", "wait_seconds")["type"] == "number"
    assert field("HeartbeatRequest", "orderly")["type"] == "boolean"
    assert schemas["ResetOffsetsRequest"]["properties"]["offsets"]["anyOf"][0][
        "additionalProperties"
    ] == {"type": "integer"}


def test_zz_tally():
    print(f"bad input: {dict(TALLY)}")


# ------------------------------------------------------------------ hostile input
@pytest.fixture(scope="module")
def hostile(cirrusmq_stack) -> dict:
    return narrow_keys(cirrusmq_stack)


def _raw_post(stack, credentials, path: str, document: dict) -> httpx.Response:
    """POST ``document`` as JSON text with \\uXXXX escapes (lone surrogates survive)."""
    with signed_client(stack, credentials) as api:
        return api.post(
            path,
            content=json.dumps(document, ensure_ascii=True).encode(),
            headers={"Content-Type": "application/json"},
        )


LONE = "\ud800"


def _surrogate_cases(hostile: dict) -> dict[str, tuple[str, str, dict]]:
    plain, group = hostile["plain"], "rv-surrogates"
    msg = {"body": b64(b"x")}
    return {
        "producer_id": (
            "producer",
            f"/v1/topics/{plain}/messages",
            {"producer_id": f"p{LONE}", "sequence": 1, "messages": [msg]},
        ),
        "tag": ("producer", f"/v1/topics/{plain}/messages", {"messages": [{**msg, "tag": LONE}]}),
        "keys": (
            "producer",
            f"/v1/topics/{plain}/messages",
            {"messages": [{**msg, "keys": [f"k{LONE}"]}]},
        ),
        "property-value": (
            "producer",
            f"/v1/topics/{plain}/messages",
            {"messages": [{**msg, "properties": {"a": f"v{LONE}"}}]},
        ),
        "property-name": (
            "producer",
            f"/v1/topics/{plain}/messages",
            {"messages": [{**msg, "properties": {f"a{LONE}": "v"}}]},
        ),
        "message_id": (
            "producer",
            f"/v1/topics/{plain}/messages",
            {"messages": [{**msg, "message_id": f"m{LONE}"}]},
        ),
        "receive-filter": (
            "consumer",
            f"/v1/groups/{group}/receive",
            {"topic": plain, "filter": f"A || B{LONE}"},
        ),
        "heartbeat-filter": (
            "consumer",
            f"/v1/groups/{group}/heartbeat",
            {"client_id": "c1", "subscriptions": {plain: f"T{LONE}"}},
        ),
        "key-description": ("admin", "/v1/keys", {"permissions": {}, "description": f"d{LONE}"}),
    }


SURROGATE_CASES = [
    "producer_id",
    "tag",
    "keys",
    "property-value",
    "property-name",
    "message_id",
    "receive-filter",
    "heartbeat-filter",
    "key-description",
]


@pytest.mark.parametrize("case", SURROGATE_CASES)
def test_a_lone_surrogate_anywhere_is_a_4xx_that_stores_nothing(hostile, case):
    who, path, document = _surrogate_cases(hostile)[case]
    stack = hostile["stack"]
    credentials = None if who == "admin" else hostile[who]
    before = stored_state(stack)
    answer = _raw_post(stack, credentials, path, document)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert stored_state(stack) == before, answer.text


# ------------------------------------------------------------------ malformed reads
def _queries(hostile: dict) -> list[str]:
    plain = hostile["plain"]
    read = f"/v1/topics/{plain}/queues/0/messages"
    return [
        f"{read}?offset=99999999999999999999999999999",
        f"{read}?offset=-99999999999999999999999999999",
        f"{read}?offset=1.5",
        f"{read}?offset=1e3",
        f"{read}?offset=",
        f"{read}?offset=0&offset=1",
        f"{read}?offset=0&max_messages=99999999999999999999999",
        f"{read}?offset=0&wait_seconds=nan",
        f"{read}?offset=0&wait_seconds=inf",
        f"{read}?offset=0&wait_seconds=1e400",
        f"{read}?offset=0&filter=",
        f"{read}?offset=0&filter=%ED%A0%80",
        f"{read}?offset=0&filter=%FF",
        f"{read}?offset=0&unknown=1",
        f"/v1/topics/{plain}/queues/99999999999999999999999/messages?offset=0",
        f"/v1/topics/{plain}/queues/-1/messages?offset=0",
        f"/v1/topics/{plain}/queues/%ED%A0%80/messages?offset=0",
        f"/v1/topics/{plain}/messages/%ED%A0%80",
        f"/v1/topics/{plain}/messages/%00",
        f"/v1/topics/{plain}/messages/{'x' * 5000}",
        f"/v1/topics/{plain}/offsets?queue=99999999999999999999999",
        "/v1/groups/%ED%A0%80",
        "/v1/groups/rv-x%00",
        "/v1/topics/%ED%A0%80",
        "/v1/producer-groups/%ED%A0%80/transactions/%ED%A0%80",
        "/v1/groups/rv-x/dead-letters?max_messages=99999999999999999999999",
        "/v1/groups/rv-x/dead-letters?cursor=%ED%A0%80",
    ]


@pytest.mark.parametrize("index", range(27))
def test_a_malformed_read_is_never_a_5xx(hostile, index):
    path = _queries(hostile)[index]
    stack = hostile["stack"]
    base, _, query = path.partition("?")
    # a query that is not UTF-8 once decoded: signed as the service reads it (each bad byte
    # a U+FFFD), since the SDK refuses to sign it
    readable = re.sub(r"%(ED%A0%80|FF)", "%EF%BF%BD", query)
    headers = sign(
        "GET",
        httpx.URL(stack.endpoint + base + ("?" + readable if query else "")),
        b"",
        stack.credentials,
        now=broker_now(),
    )
    with httpx.Client(base_url=stack.endpoint, timeout=60) as api:
        answer = api.get(path, headers=headers)
    assert answer.status_code < 500, (path, answer.status_code, answer.text)


# ------------------------------------------------------------------ refusals store nothing
def _refusals(hostile: dict) -> dict[str, tuple[str, str, str, dict]]:
    plain, fifo = hostile["plain"], hostile["fifo"]
    missing = f"rv-missing-{uuid.uuid4().hex[:6]}"
    fresh = f"rv-fresh-{uuid.uuid4().hex[:6]}"
    return {
        "heartbeat-one-forbidden-topic": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/heartbeat",
            {"client_id": "c1", "subscriptions": {plain: "*", "secret": "*"}},
        ),
        "heartbeat-missing-topic": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/heartbeat",
            {"client_id": "c1", "subscriptions": {plain: "*", missing: "*"}},
        ),
        "heartbeat-one-bad-filter": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/heartbeat",
            {"client_id": "c1", "subscriptions": {plain: "*", fifo: ""}},
        ),
        "receive-missing-topic": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/receive",
            {"topic": missing},
        ),
        "receive-empty-filter": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/receive",
            {"topic": plain, "filter": " "},
        ),
        "subscription-empty-filter": (
            "consumer",
            "PUT",
            f"/v1/groups/{fresh}/subscriptions/{plain}",
            {"filter": ""},
        ),
        "send-second-message-bad": (
            "producer",
            "POST",
            f"/v1/topics/{plain}/messages",
            {"messages": [{"body": b64(b"ok")}, {"body": b64(b"x"), "message_id": ""}]},
        ),
        "stamped-send-second-message-bad": (
            "producer",
            "POST",
            f"/v1/topics/{plain}/messages",
            {
                "producer_id": "p-rv",
                "sequence": 7,
                "messages": [{"body": b64(b"ok")}, {"body": b64(b"x"), "tag": ""}],
            },
        ),
        "fifo-send-empty-group": (
            "producer",
            "POST",
            f"/v1/topics/{fifo}/messages",
            {
                "messages": [
                    {"body": b64(b"ok"), "message_group": "g"},
                    {"body": b64(b"x"), "message_group": ""},
                ]
            },
        ),
        "reset-offsets-bad": (
            "consumer",
            "POST",
            f"/v1/groups/{fresh}/offsets/{plain}/reset",
            {"offset": True},
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "heartbeat-one-forbidden-topic",
        "heartbeat-missing-topic",
        "heartbeat-one-bad-filter",
        "receive-missing-topic",
        "receive-empty-filter",
        "subscription-empty-filter",
        "send-second-message-bad",
        "stamped-send-second-message-bad",
        "fifo-send-empty-group",
        "reset-offsets-bad",
    ],
)
def test_a_refused_request_stores_nothing(hostile, case):
    who, method, path, document = _refusals(hostile)[case]
    stack = hostile["stack"]
    before = stored_state(stack)
    with signed_client(stack, hostile[who]) as api:
        answer = api.request(method, path, json=document)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert stored_state(stack) == before, answer.text


def test_a_malformed_sql_filter_names_the_position_and_what_was_expected(api, topic_name):
    make_topic(api, topic_name, queues=1)
    response = api.post(
        "/v1/groups/grp/receive",
        json={"topic": topic_name, "filter": "a > 5 AND", "filter_type": "SQL92"},
    )
    assert response.status_code == 400
    error = response.json()
    assert error["code"] == "InvalidFilterExpression"
    assert error["details"] == {
        "position": 9,
        "expected": "a property, a constant, NOT or '('",
        "found": "the end of the expression",
    }
    described = api.get("/v1/groups/grp").json()
    # nothing recorded for this topic (the module's other tests subscribe grp to theirs)
    assert [s for s in described["subscriptions"] if s["topic"] == topic_name] == []
