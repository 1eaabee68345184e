"""``DeadLetter`` parses every field of the dead-letter listing, ``redriven`` included."""

from __future__ import annotations

import base64

import pytest
from cirrusmq import TransportError
from cirrusmq.admin.dead_letters import DeadLetter

WIRE = {
    "dlq_offset": 3,
    "message_id": "01JD0000000000000000000000",
    "origin_topic": "orders",
    "origin_queue": 2,
    "origin_offset": 41,
    "delivery_attempts": 16,
    "reason": "invisible time expired 16 times",
    "stored_timestamp": 1_790_000_000_000,
    "born_timestamp": 1_789_999_000_000,
    "tag": "TagA",
    "keys": ["order-1"],
    "body_preview": base64.b64encode(b"hello").decode(),
    "body_bytes": 5,
    "redriven": True,
}


def test_a_dead_letter_says_whether_it_was_redriven() -> None:
    letter = DeadLetter.from_wire(WIRE)
    assert letter.redriven is True
    assert (letter.origin_topic, letter.body_preview, letter.keys) == (
        "orders",
        b"hello",
        ("order-1",),
    )
    assert DeadLetter.from_wire({**WIRE, "redriven": False}).redriven is False


def test_a_service_without_the_field_means_not_redriven() -> None:
    older = {k: v for k, v in WIRE.items() if k != "redriven"}
    assert DeadLetter.from_wire(older).redriven is False


def test_a_malformed_redriven_field_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        DeadLetter.from_wire({**WIRE, "redriven": "yes"})
