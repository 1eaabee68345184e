"""A nack on a FIFO topic gives back the message's whole delivery (one lease per queue): the
messages after it come back with it, also one whose invisible time was changed to run
longer (docs/http-api.md, nack)."""

from __future__ import annotations

from cirrusmq_broker.model import MessageInput, MessageType


def test_a_fifo_nack_of_one_message_gives_back_its_whole_delivery(broker, settings, clock):
    other = type(broker)(settings, clock)  # a second container: no local FIFO recheck cache
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"m4", message_group="k")])
    broker.produce.send("f", [MessageInput(b"m5", message_group="k")])
    m4, m5 = broker.consume.receive("g1", "f", invisible_seconds=10, max_messages=10)
    changed = broker.consume.change_invisible("g1", m4.receipt_handle, 30)
    assert changed.invisible_until == m4.invisible_until + 20_000
    clock.advance(11)  # past m5's first deadline, but the change moved the whole delivery
    assert broker.consume.receive("g1", "f", max_messages=10) == []
    # m5's first handle still names the (postponed) lease: the nack is live, not expired
    assert [o.status.value for o in broker.retries.nack("g1", [m5.receipt_handle])] == ["acked"]
    clock.advance(11)  # +22: the nack's 10 s suspension (from +11) is over; m4's 30 s is not
    got = other.consume.receive("g1", "f", max_messages=10)
    assert [(m.message.body, m.delivery_attempt) for m in got] == [(b"m4", 2), (b"m5", 2)]
