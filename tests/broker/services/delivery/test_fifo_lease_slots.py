"""FIFO leases span interleaved offsets (per message group): each lease's slot (its start)
stays unique among open leases, also for the rest of a lease redelivered in part."""

from __future__ import annotations

from broker_helpers import create_fifo_topic, send


def bodies(received) -> list[bytes]:
    return [r.message.body for r in received]


def test_a_partly_redelivered_lease_leaves_its_rest_where_no_other_lease_starts(broker, clock):
    create_fifo_topic(broker, "f", queues=1)
    for body in (b"a0", b"b0", b"a1", b"b1"):
        send(broker, "f", body, message_group=body[:1].decode())
    [a0] = broker.consume.receive("G", "f", max_messages=1)
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"b0", b"b1"]
    clock.advance(30)
    broker.consume.ack("G", [a0.receipt_handle])
    # a1 (offset 2, held until now) goes under a lease starting at 2, inside b's [1, 4)
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a1"]
    clock.advance(31)  # b's lease expired, a1's did not
    again = broker.consume.receive("G", "f", max_messages=1)  # b0 alone: b1's rest splits off
    assert [(r.message.body, r.delivery_attempt) for r in again] == [(b"b0", 2)]
    rest = broker.consume.receive("G", "f", max_messages=1)
    assert rest == []  # b1 waits behind b0, in flight again
