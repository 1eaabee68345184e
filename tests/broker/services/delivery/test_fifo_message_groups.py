"""FIFO topics hold per message group: while a message of one group is in flight (or waits
to be redelivered), later messages of that group wait, and other groups' messages of the
same queue flow, each group in its order (RocketMQ 5 and SQS FIFO)."""

from __future__ import annotations

from broker_helpers import ack_statuses, crashing_at, create_fifo_topic, send, statuses


def interleaved(broker, topic: str = "f") -> None:
    """a0 b0 a1 b1 on the topic's one queue (offsets 0-3)."""
    create_fifo_topic(broker, topic, queues=1)
    for body in (b"a0", b"b0", b"a1", b"b1"):
        send(broker, topic, body, message_group=body[:1].decode())


def bodies(received) -> list[bytes]:
    return [r.message.body for r in received]


def settle_all(broker, clock, group: str, topic: str = "f") -> list[bytes]:
    """Receive and ack until nothing is left (the clock moving past any lease)."""
    seen: list[bytes] = []
    for _ in range(10):
        got = broker.consume.receive(group, topic, max_messages=10)
        if not got:
            clock.advance(61)
            got = broker.consume.receive(group, topic, max_messages=10)
            if not got:
                return seen
        seen += bodies(got)
        assert ack_statuses(broker, group, [r.receipt_handle for r in got]) == ["acked"] * len(got)
    return seen


def test_another_group_flows_while_one_is_in_flight_on_the_same_queue(broker):
    interleaved(broker)
    [a0] = broker.consume.receive("G", "f", max_messages=1)
    assert a0.message.body == b"a0"
    rest = broker.consume.receive("G", "f", max_messages=10)
    assert bodies(rest) == [b"b0", b"b1"]  # a1 waits for a0
    assert broker.consume.receive("G", "f", max_messages=10) == []
    broker.consume.ack("G", [a0.receipt_handle])
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a1"]
    broker.consume.ack("G", [r.receipt_handle for r in rest])
    [queue] = statuses(broker, "G")
    assert queue.inflight == 1 and queue.committed_offset == 2  # a1 (offset 2) in flight


def test_a_group_keeps_its_order_across_nack_expiry_and_redelivery(broker, clock):
    interleaved(broker)
    [a0] = broker.consume.receive("G", "f", max_messages=1)
    assert [o.status.value for o in broker.retries.nack("G", [a0.receipt_handle])] == ["acked"]
    got = broker.consume.receive("G", "f", max_messages=10)
    assert bodies(got) == [b"b0", b"b1"]  # a0 suspended by the nack holds a1 back
    broker.consume.ack("G", [r.receipt_handle for r in got])
    clock.advance(11)  # the nack's suspension is over: a0 comes back alone
    again = broker.consume.receive("G", "f", max_messages=10)
    assert [(r.message.body, r.delivery_attempt) for r in again] == [(b"a0", 2)]
    clock.advance(61)  # its lease expires: redelivered in place, a1 still behind it
    third = broker.consume.receive("G", "f", max_messages=10)
    assert [(r.message.body, r.delivery_attempt) for r in third] == [(b"a0", 3)]
    broker.consume.ack("G", [third[0].receipt_handle])
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a1"]


def test_a_dead_lettered_head_releases_its_group_only_once_it_is_a_dead_letter(broker, clock):
    interleaved(broker)
    broker.retries.set_max_delivery_attempts("G", 2)
    [a0] = broker.consume.receive("G", "f", max_messages=1)
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"b0", b"b1"]
    clock.advance(61)  # every lease expired: a0 and b0, b1 come back, a1 still waits
    again = broker.consume.receive("G", "f", max_messages=10)
    assert sorted(bodies(again)) == [b"a0", b"b0", b"b1"]
    broker.consume.ack("G", [r.receipt_handle for r in again if r.message.body != b"a0"])
    clock.advance(61)  # a0's second delivery failed too: a dead letter, and a1 follows
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a1"]
    assert [d.message.body for d in broker.dead_letters.list("G", topic="f").dead_letters] == [
        b"a0"
    ]


def test_a_receive_crashed_at_any_call_loses_nothing_and_keeps_each_group_in_order(broker, clock):
    interleaved(broker)
    for n in range(40):
        group = f"G{n}"
        [a0] = broker.consume.receive(group, "f", max_messages=1)
        got: list = []
        died = crashing_at(
            n,
            lambda got=got, group=group: got.extend(
                broker.consume.receive(group, "f", max_messages=10)
            ),
        )
        if not died:
            assert bodies(got) == [b"b0", b"b1"]  # a1 held back behind a0
            break
        broker.consume.ack(group, [a0.receipt_handle])
        seen = settle_all(broker, clock, group)
        assert sorted(seen) == [b"a1", b"b0", b"b1"], n
        assert seen.index(b"b0") < seen.index(b"b1"), n
        [queue] = statuses(broker, group)
        assert (queue.committed_offset, queue.inflight) == (4, 0), n
    else:
        raise AssertionError("the receive never completed")
