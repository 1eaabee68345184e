"""SDK side of delayed messages: the wire fields, scheduled receipts, the cancel route and
the CLI's --delay / --deliver-at (no service needed)."""

from __future__ import annotations

import time

import pytest
import typer
from cirrusmq import Message, SendReceipt
from cirrusmq.cli.send import schedule_fields as _schedule
from cirrusmq.message import scheduled_path
from cirrusmq.producer.send_state import receipts_of


def test_delay_fields_go_on_the_wire_only_when_set():
    assert "delay_level" not in Message("t", b"x").to_wire("id", 1)
    wire = Message("t", b"x", delay_level=3).to_wire("id", 1)
    assert wire["delay_level"] == 3 and "delivery_timestamp" not in wire
    assert Message("t", b"x", delivery_timestamp=5).to_wire("id", 1)["delivery_timestamp"] == 5


def test_scheduled_receipts_are_parsed():
    body = {
        "receipts": [
            {"message_id": "a", "queue": 1, "offset": 4},
            {
                "message_id": "b",
                "queue": 2,
                "offset": None,
                "scheduled": True,
                "delivery_timestamp": 99,
            },
        ]
    }

    class Batch:
        topic = "t"

    receipts = receipts_of(Batch(), body)  # type: ignore[arg-type]
    assert not receipts["a"].scheduled and receipts["a"].offset == 4
    assert receipts["b"].scheduled and receipts["b"].delivery_timestamp == 99


def test_cancel_path_from_a_receipt_or_fields():
    receipt = SendReceipt("m/1", "t", 0, None, delivery_timestamp=42)
    assert scheduled_path(receipt, None, None) == (
        "/v1/topics/t/scheduled/m%2F1",
        {"delivery_timestamp": "42"},
    )
    assert scheduled_path("t", "m", 7)[1] == {"delivery_timestamp": "7"}
    with pytest.raises(ValueError):
        scheduled_path("t", "m", None)


def test_cli_delay_options():
    assert _schedule("30s", None) == {"delay_level": 4}
    assert _schedule("2h", None) == {"delay_level": 18}
    at = _schedule("45s", None)["delivery_timestamp"]
    assert abs(at - (time.time() * 1000 + 45_000)) < 5_000
    assert _schedule(None, "1700000000000") == {"delivery_timestamp": 1_700_000_000_000}
    assert _schedule(None, "2026-01-01T00:00:00Z") == {"delivery_timestamp": 1_767_225_600_000}
    assert _schedule(None, "2026-01-01T00:00:00") == {"delivery_timestamp": 1_767_225_600_000}
    for bad in (("soon", None), (None, "tomorrow"), ("1s", "1")):
        with pytest.raises(typer.BadParameter):
            _schedule(*bad)
