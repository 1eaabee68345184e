"""Messages, filters and ids: the SDK's data model and its wire form."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from cirrusmq import FilterExpression, Message, MessageView
from cirrusmq.message import new_message_id, normalize_subscriptions


def test_message_is_frozen_and_normalizes_its_fields():
    message = Message("orders", "héllo", tag="created", keys=["k1", "k2"], properties={"a": "1"})
    assert message.body == "héllo".encode()
    assert message.keys == ("k1", "k2")
    assert dict(message.properties) == {"a": "1"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.topic = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        message.properties["b"] = "2"  # type: ignore[index]


def test_wire_form_carries_only_what_is_set():
    wire = Message("t", b"\x00\x01", message_group="g").to_wire("id-1", 123)
    assert wire == {
        "message_id": "id-1",
        "body": base64.b64encode(b"\x00\x01").decode(),
        "born_timestamp": 123,
        "message_group": "g",
    }


def test_delivery_timestamp_goes_on_the_wire():
    assert Message("t", b"x", delivery_timestamp=1).to_wire("id", 1)["delivery_timestamp"] == 1


def test_message_ids_are_valid_unique_and_sortable_by_time():
    ids = [new_message_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 26 and i.isalnum() for i in ids)
    assert ids[0][:10] <= ids[-1][:10]  # the first 10 characters are the millisecond


@pytest.mark.parametrize("text", ["*", "A", "A || B", "  A||B||C "])
def test_filter_expressions_accepted(text):
    assert FilterExpression(text).expression == text.strip()


@pytest.mark.parametrize("text", ["", "A |", "A || *", "A B"])
def test_filter_expressions_refused(text):
    with pytest.raises(ValueError):
        FilterExpression(text)


def test_subscriptions_accept_mappings_strings_and_topic_lists():
    assert normalize_subscriptions({"a": "X || Y", "b": FilterExpression.ALL}) == {
        "a": FilterExpression("X || Y"),
        "b": FilterExpression("*"),
    }
    assert normalize_subscriptions(["a"]) == {"a": FilterExpression.ALL}
    assert FilterExpression.tags(["A", "B"]).expression == "A || B"


def test_message_view_from_wire():
    view = MessageView.from_wire(
        {
            "message_id": "m",
            "topic": "t",
            "queue": 1,
            "offset": 2,
            "body": base64.b64encode(b"hi").decode(),
            "tag": None,
            "keys": ["k"],
            "properties": {},
            "message_group": None,
            "born_timestamp": 1,
            "stored_timestamp": 2,
            "receipt_handle": "h",
            "delivery_attempt": 1,
            "invisible_until": 3,
        }
    )
    assert (view.text, view.keys, view.receipt_handle, view.invisible_until) == (
        "hi",
        ("k",),
        "h",
        3,
    )
