"""Handing out messages held for their group reads the batches holding them, not every
batch between them (an SQS send is a batch of its own: held messages lie far apart)."""

from __future__ import annotations

from broker_helpers import count_calls, create_fifo_topic, send
from cirrusmq_broker.container import Broker


def test_held_messages_far_apart_cost_one_object_read_each(broker, settings, clock):
    create_fifo_topic(broker, "f", queues=1)
    send(broker, "f", b"a0", message_group="a")
    [a0] = broker.consume.receive("G", "f", max_messages=1)
    for n in range(90):  # a's three held messages, each 30 b batches apart
        if n % 30 == 0:
            send(broker, "f", b"a", message_group="a")
        send(broker, "f", b"b", message_group="b")
    while got := broker.consume.receive("G", "f", max_messages=10):
        assert {r.message.body for r in got} == {b"b"}
        broker.consume.ack("G", [r.receipt_handle for r in got])
    broker.consume.ack("G", [a0.receipt_handle])
    other = Broker(settings, clock)  # another container: nothing cached
    calls, remove = count_calls()
    try:
        got = other.consume.receive("G", "f", max_messages=10)
    finally:
        remove()
    assert [r.message.body for r in got] == [b"a"] * 3
    assert calls["s3.GetObject"] == 3
