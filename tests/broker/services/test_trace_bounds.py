"""Message trace lookups: bounded, and correct at the edges of their window."""

from __future__ import annotations

import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import MessageNotFound

@pytest.mark.parametrize("message_id", ["7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "7" + "0" * 25])
def test_a_message_id_of_a_time_past_the_calendar_is_not_found_not_a_fault(
    broker: Broker, message_id: str
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    with pytest.raises(MessageNotFound):
        broker.trace_reader.trace_message("orders", message_id)


@pytest.mark.parametrize("message_id", ["7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "7" + "0" * 25])
def test_a_message_lookup_by_an_id_of_a_time_past_the_calendar_is_not_found(
    broker: Broker, message_id: str
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    with pytest.raises(MessageNotFound):
        broker.lookup.lookup("orders", message_id)
