"""Message trace lookups: bounded, and correct at the edges of their window."""

from __future__ import annotations

import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import MessageNotFound
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.trace_objects import TRACE_PREFIX, encode, object_key
from ulid import ULID

HOUR_MS = 3_600_000


def _put_event(broker: Broker, time_ms: int, topic: str, message_id: str) -> None:
    key = object_key(str(ULID.from_timestamp(time_ms / 1000)), time_ms, [topic])
    event = {"time": time_ms, "kind": "sent", "topic": topic, "message_id": message_id}
    broker.trace._store.put(key, encode([event]), retention_hours=24)


@pytest.mark.parametrize("message_id", ["7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "7" + "0" * 25])
def test_a_message_id_of_a_time_past_the_calendar_is_not_found_not_a_fault(
    broker: Broker, message_id: str
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    with pytest.raises(MessageNotFound):
        broker.trace_reader.trace_message("orders", message_id)


def test_a_lookup_skips_the_objects_written_before_the_message_was_born(
    broker: Broker, clock
) -> None:  # noqa: ANN001
    """Objects of the same hour written before the message's window are not read: a busy
    hour before a message's birth never uses up the lookup's reads."""
    broker.admin.create_topic("orders", queues=1, trace=True)
    hour = (clock.now // HOUR_MS - 3) * HOUR_MS
    born = hour + 50 * 60_000
    message_id = str(ULID.from_timestamp(born / 1000))
    for i in range(300):  # earlier in the hour, other messages of the same topic
        _put_event(broker, hour + i * 1000, "orders", str(ULID.from_timestamp((hour + i) / 1000)))
    _put_event(broker, born + 1000, "orders", message_id)
    gets: list[str] = []
    remove = observe_calls(
        lambda service, operation, params: (
            gets.append(params.get("Key", ""))
            if operation == "GetObject" and str(params.get("Key", "")).startswith(TRACE_PREFIX)
            else None
        )
    )
    try:
        events = broker.trace_reader.trace_message("orders", message_id)
    finally:
        remove()
    assert [e["kind"] for e in events] == ["sent"]
    assert len(gets) == 1


@pytest.mark.parametrize("message_id", ["7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "7" + "0" * 25])
def test_a_message_lookup_by_an_id_of_a_time_past_the_calendar_is_not_found(
    broker: Broker, message_id: str
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    with pytest.raises(MessageNotFound):
        broker.lookup.lookup("orders", message_id)
