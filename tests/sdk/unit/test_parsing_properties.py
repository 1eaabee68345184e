"""Property tests (hypothesis) of the SDK's parsing of server answers: whatever JSON body and
status the service (or a proxy) answers, the SDK returns a typed result or raises one of its
own ``MQError`` subclasses — never ``KeyError``, ``TypeError`` and the like."""

from __future__ import annotations

import base64
import contextlib
import json

import httpx
from cirrusmq import (
    AccessKey,
    AccessKeySecret,
    AckStatus,
    AuthenticationError,
    MessageView,
    MQError,
    Permissions,
    Topic,
)
from cirrusmq.consumer.acks import parse_ack_response
from cirrusmq.errors import error_from_response
from cirrusmq.message import parse_receive_response
from cirrusmq.outbox import OutboxBatch
from cirrusmq.producer.send_state import receipts_of
from cirrusmq.transport import RetryPolicy, Transport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .signature_check import FAKE_CREDENTIALS

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
statuses = st.integers(min_value=100, max_value=599)


def _wire_message() -> st.SearchStrategy[dict]:
    """Well-formed messages, with some fields possibly replaced by arbitrary JSON."""
    base = st.fixed_dictionaries(
        {
            "message_id": st.text(min_size=1),
            "topic": st.text(min_size=1),
            "body": st.binary().map(lambda b: base64.b64encode(b).decode()),
            "queue": st.integers(0, 63),
            "offset": st.integers(0),
            "born_timestamp": st.integers(0),
            "stored_timestamp": st.integers(0),
        },
        optional={
            "tag": st.none() | st.text(),
            "keys": st.lists(st.text()),
            "properties": st.dictionaries(st.text(), st.text()),
            "receipt_handle": st.text(),
            "delivery_attempt": st.integers(1, 100),
            "invisible_until": st.integers(0),
        },
    )
    return base


def _mutated(strategy: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    """``strategy``'s objects with one field removed or replaced by arbitrary JSON."""

    @st.composite
    def mutate(draw: st.DrawFn) -> dict:
        value = dict(draw(strategy))
        if value and draw(st.booleans()):
            name = draw(st.sampled_from(sorted(value)))
            if draw(st.booleans()):
                del value[name]
            else:
                value[name] = draw(json_values)
        return value

    return mutate()


@SETTINGS
@given(statuses, json_values)
def test_any_error_answer_maps_to_a_typed_error(status, body):
    error = error_from_response(status, body)
    assert isinstance(error, MQError)
    assert error.http_status == status
    assert error.code is None or isinstance(error.code, str)
    assert isinstance(str(error), str) and isinstance(dict(error.details), dict)
    if status == 401:
        assert isinstance(error, AuthenticationError)


@SETTINGS
@given(
    st.sampled_from(
        [
            "MissingSignature",
            "InvalidSignature",
            "RequestExpired",
            "ReplayedRequest",
            "AccessDenied",
        ]
    ),
    st.sampled_from([401, 403]),
    json_values,
)
def test_auth_codes_with_any_message_or_details(code, status, extra):
    error = error_from_response(status, {"code": code, "message": extra, "details": extra})
    assert isinstance(error, MQError) and error.code == code and not error.retriable


@SETTINGS
@given(st.lists(st.text(min_size=1), min_size=1, max_size=5, unique=True), json_values)
def test_any_ack_answer_gives_results_or_an_mq_error(handles, body):
    try:
        results = parse_ack_response(handles, body)
    except MQError:
        return
    assert [r.receipt_handle for r in results] == handles
    assert all(
        isinstance(r.status, AckStatus) and r.status is not AckStatus.PENDING for r in results
    )


@SETTINGS
@given(
    st.lists(st.text(min_size=1), min_size=1, max_size=5, unique=True),
    st.lists(
        st.fixed_dictionaries(
            {"receipt_handle": st.text()},
            optional={"status": json_values, "code": json_values, "message": json_values},
        ),
        max_size=6,
    ),
)
def test_near_valid_ack_results(handles, items):
    try:
        results = parse_ack_response(handles, {"results": items})
    except MQError:
        return
    assert len(results) == len(handles)


@SETTINGS
@given(_mutated(_wire_message()) | json_values)
def test_any_message_parses_or_raises_an_mq_error(data):
    try:
        message = MessageView.from_wire(data)
    except MQError:
        return
    assert isinstance(message.body, bytes) and isinstance(message.queue, int)
    assert all(isinstance(k, str) for k in message.keys)


@SETTINGS
@given(_wire_message())
def test_well_formed_messages_parse(data):
    message = MessageView.from_wire(data)
    assert message.message_id == data["message_id"] and message.offset == data["offset"]


@SETTINGS
@given(json_values | st.fixed_dictionaries({"messages": st.lists(_mutated(_wire_message()))}))
def test_any_receive_answer_parses_or_raises_an_mq_error(body):
    try:
        messages = parse_receive_response(body)
    except MQError:
        return
    assert all(isinstance(m, MessageView) for m in messages)


@SETTINGS
@given(
    json_values
    | st.fixed_dictionaries(
        {
            "receipts": st.lists(
                _mutated(
                    st.fixed_dictionaries(
                        {"message_id": st.text(), "queue": st.integers(), "offset": st.integers()}
                    )
                )
            )
        }
    )
)
def test_any_send_answer_parses_or_raises_an_mq_error(body):
    batch = OutboxBatch("t", "p", 0, ("m",), b"{}")
    try:
        receipts = receipts_of(batch, body)
    except MQError:
        return
    assert all(
        r.topic == "t" and (isinstance(r.offset, int) or r.scheduled) for r in receipts.values()
    )


_permissions = st.fixed_dictionaries(
    {
        "admin": st.booleans(),
        "publish": st.lists(st.text()),
        "subscribe": st.lists(
            st.fixed_dictionaries({"groups": st.lists(st.text()), "topics": st.lists(st.text())})
        ),
    }
)
_key = st.fixed_dictionaries(
    {
        "access_key": st.text(min_size=1),
        "description": st.text(),
        "permissions": _mutated(_permissions),
        "status": st.sampled_from(["ACTIVE", "DISABLED"]),
        "created_timestamp": st.integers(0),
        "secret_key": st.text(min_size=1),
    }
)


@SETTINGS
@given(_mutated(_key) | json_values)
def test_any_key_or_topic_answer_parses_or_raises_an_mq_error(data):
    for parse in (AccessKey.from_wire, AccessKeySecret.from_wire, Topic.from_wire):
        with contextlib.suppress(MQError):
            parse(data)


@SETTINGS
@given(_permissions)
def test_permissions_round_trip(data):
    assert Permissions.from_wire(data).to_wire() == data


@SETTINGS
@given(statuses, st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_the_transport_answers_any_response_with_a_value_or_an_mq_error(status, content):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content, headers={"date": "garbage"})

    transport = Transport(
        "http://fake",
        FAKE_CREDENTIALS,
        retry=RetryPolicy(max_attempts=1),
        http_transport=httpx.MockTransport(handler),
    )
    try:
        transport.request("GET", "/v1/topics")
    except MQError as error:
        assert error.http_status in (None, status)
    finally:
        transport.close()
