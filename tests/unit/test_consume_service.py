"""Consume on in-process moto with a fake clock: fairness, filters, leases, acks."""

from __future__ import annotations

import threading

import pytest
from broker_helpers import ack_statuses, send, statuses
from cirrusmq_broker.errors import (
    ForeignReceiptHandle,
    InvalidDuration,
    InvalidReceiptHandle,
    MessageNotFound,
    ReceiptHandleExpired,
)
from cirrusmq_broker.model import MessageType
from cirrusmq_broker.services.produce import MessageInput


def fill_queues(broker, topic: str, per_queue: list[int], **options) -> None:
    broker.admin.create_topic(topic, queues=len(per_queue), **options)
    for queue, count in enumerate(per_queue):
        group = next(
            g for g in (f"k{i}" for i in range(1000)) if _queue_of(g, len(per_queue)) == queue
        )
        if count:
            broker.produce.send(topic, [MessageInput(b"m", message_group=group)] * count)


def _queue_of(group: str, queues: int) -> int:
    import zlib

    return zlib.crc32(group.encode()) % queues


def test_each_receive_starts_at_the_next_queue(broker):
    fill_queues(broker, "t", [10, 10, 10, 10])
    firsts = [broker.consume.receive("g", "t", max_messages=2)[0].message.queue for _ in range(4)]
    assert sorted(firsts) == [0, 1, 2, 3]


def test_receive_moves_on_to_the_next_queues_until_max_messages(broker):
    fill_queues(broker, "t", [3, 3, 3, 3])
    got = broker.consume.receive("g", "t", max_messages=8)
    assert len(got) == 8 and len({m.message.queue for m in got}) == 3


def test_a_busy_queue_does_not_starve_a_quiet_one(broker):
    fill_queues(broker, "t", [200, 1])
    served = set()
    for _ in range(2):  # one full turn of the queues
        served |= {m.message.queue for m in broker.consume.receive("g", "t", max_messages=10)}
    assert served == {0, 1}


def test_filtered_out_messages_are_skipped_and_committed(broker):
    broker.admin.create_topic("t", queues=1)
    for tag in ["A", "B", "A", "C"]:
        send(broker, "t", tag.encode(), tag=tag)
    got = broker.consume.receive("g", "t", filter_expression="B || C", max_messages=10)
    assert [m.message.tag for m in got] == ["B", "C"]
    broker.consume.ack("g", [m.receipt_handle for m in got])
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.cursor, status.lag, status.inflight) == (4, 4, 0, 0)
    assert broker.consume.receive("g", "t", filter_expression="B || C") == []


def test_unacked_message_comes_back_after_invisible_duration(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [first] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert first.delivery_attempt == 1
    clock.advance(9.9)
    assert broker.consume.receive("g", "t") == []
    clock.advance(0.2)  # expired: moved to the retry topic's first level (10 s backoff)
    assert broker.consume.receive("g", "t", invisible_seconds=10) == []
    clock.advance(10)
    [again] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert again.delivery_attempt == 2 and again.message.offset == first.message.offset
    assert (again.message.topic, again.message.message_id) == ("t", first.message.message_id)
    assert ack_statuses(broker, "g", [first.receipt_handle]) == ["expired"]  # moved on
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]  # acking twice is fine
    clock.advance(60)
    assert broker.consume.receive("g", "t") == []


def test_ack_acts_on_every_valid_handle(broker, clock):
    fifo = MessageType.FIFO.value  # an expired lease is redelivered in place
    fill_queues(broker, "t", [1, 1], message_type=fifo)  # two queues, so two leases
    got = broker.consume.receive("g", "t", invisible_seconds=10)
    assert len(got) == 2
    clock.advance(11)
    again = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    stale = next(
        m
        for m in got
        if m.message.offset == again[0].message.offset and m.message.queue == again[0].message.queue
    )
    fresh = next(m for m in got if m is not stale)
    outcomes = broker.consume.ack("g", [fresh.receipt_handle, stale.receipt_handle])
    assert [o.status.value for o in outcomes] == ["acked", "expired"]
    assert isinstance(outcomes[1].error, ReceiptHandleExpired)
    assert sum(s.inflight for s in statuses(broker, "g")) == 1  # the stale one's redelivery


def test_foreign_and_forged_handles(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g1", "t")
    [foreign] = broker.consume.ack("g2", [m.receipt_handle])
    assert foreign.status.value == "invalid" and isinstance(foreign.error, ForeignReceiptHandle)
    flipped = "B" if m.receipt_handle[-5] == "A" else "A"  # a signature bit that counts
    [forged] = broker.consume.ack("g1", [m.receipt_handle[:-5] + flipped + m.receipt_handle[-4:]])
    assert forged.status.value == "invalid" and isinstance(forged.error, InvalidReceiptHandle)
    assert statuses(broker, "g1")[0].inflight == 1


def test_change_invisible_duration_postpones_redelivery(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    got = broker.consume.receive("g", "t", invisible_seconds=10)
    changed = broker.consume.change_invisible("g", got[0].receipt_handle, 100)
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []  # y's lease expired: y moved to retry
    clock.advance(10)  # the retry topic's first backoff level
    again = broker.consume.receive("g", "t", invisible_seconds=10)
    assert [m.message.body for m in again] == [b"y"]
    assert ack_statuses(broker, "g", [changed.receipt_handle]) == ["acked"]
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", changed.receipt_handle, 100)
    with pytest.raises(InvalidDuration):
        broker.consume.change_invisible("g", again[0].receipt_handle, 5)


def test_groups_consume_independently(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    assert len(broker.consume.receive("g1", "t")) == 1
    assert len(broker.consume.receive("g2", "t")) == 1


def test_response_stays_under_the_byte_budget(broker):
    broker.admin.create_topic("t", queues=1)
    for _ in range(3):
        send(broker, "t", b"x" * (3 * 1024 * 1024))
    assert len(broker.consume.receive("g", "t", max_messages=3)) == 1


def test_long_poll_returns_when_a_message_arrives(broker):
    broker.admin.create_topic("t", queues=1)
    threading.Timer(0.3, lambda: send(broker, "t", b"late")).start()
    got = broker.consume.receive("g", "t", wait_seconds=5)
    assert [m.message.body for m in got] == [b"late"]


def test_lookup_by_message_id(broker):
    broker.admin.create_topic("t", queues=2)
    [receipt] = broker.produce.send(
        "t", [MessageInput(b"hello", message_id="id-1", keys=("k",))]
    ).receipts
    found = broker.lookup.lookup("t", "id-1")
    assert (found.body, found.offset, found.queue, found.keys) == (
        b"hello",
        receipt.offset,
        receipt.queue,
        ("k",),
    )
    with pytest.raises(MessageNotFound):
        broker.lookup.lookup("t", "id-2")
    broker.admin.create_topic("other")
    with pytest.raises(MessageNotFound):
        broker.lookup.lookup("other", "id-1")


class SimulatedCrash(BaseException):
    pass


def test_a_receive_that_dies_after_leasing_loses_nothing(broker, clock, monkeypatch):
    """The lease is stored but the consumer never got the messages: they come back."""
    from cirrusmq_broker.services.receipt_handles import ReceiptHandles

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    with monkeypatch.context() as patch:
        patch.setattr(
            ReceiptHandles, "received", lambda *a: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.consume.receive("g", "t", invisible_seconds=10)
    assert broker.consume.receive("g", "t") == []  # leased, invisible
    clock.advance(10)
    assert broker.consume.receive("g", "t") == []  # moved to the retry topic (10 s)
    clock.advance(10)
    again = broker.consume.receive("g", "t", invisible_seconds=10)
    assert [(m.message.body, m.delivery_attempt) for m in again] == [(b"a", 2), (b"b", 2)]
