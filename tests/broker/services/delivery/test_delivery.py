"""Consume on in-process moto with a fake clock: fairness, filters and subscriptions, leases,
acks, flow control, lookups, the group's status."""

from __future__ import annotations

import threading
import zlib

import pytest
from broker_helpers import ack_statuses, create_fifo_topic, send, statuses
from cirrusmq_broker.errors import (
    ForeignReceiptHandle,
    InvalidDuration,
    InvalidReceiptHandle,
    InvalidRequest,
    MessageNotFound,
    ReceiptHandleExpired,
    SubscriptionConflict,
)
from cirrusmq_broker.model import MessageInput, MessageType, ProducerStamp
from cirrusmq_broker.rules.filters import Subscription
from cirrusmq_broker.rules.receipts import ReceiptHandle, ReceiptSigner
from cirrusmq_broker.services.delivery.queue_plan import FLOW_RECHECK_SECONDS
from cirrusmq_broker.storage.groups import GroupStateStore


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


def test_ack_of_an_acked_message_succeeds_after_compaction(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    send(broker, "t", b"b")
    [a] = broker.consume.receive("g", "t", max_messages=1)
    [b] = broker.consume.receive("g", "t", max_messages=1)
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]
    send(broker, "t", b"c")
    broker.consume.receive("g", "t", max_messages=1)  # compacts: b's lease is dropped
    assert ack_statuses(broker, "g", [b.receipt_handle, a.receipt_handle]) == ["acked", "acked"]
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]


def test_a_group_member_with_another_filter_is_refused(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", tag="A")
    broker.consume.receive("g", "t", filter_expression="A || B")
    assert broker.consume.receive("g", "t", filter_expression="B||A") == []  # same filter
    with pytest.raises(SubscriptionConflict) as err:
        broker.consume.receive("g", "t", filter_expression="C")
    assert err.value.details == {"topic": "t", "subscribed": "A || B", "requested": "C"}
    assert broker.consume.subscribe("g", "t", "C") == Subscription("C")
    send(broker, "t", b"y", tag="C")
    assert [m.message.body for m in broker.consume.receive("g", "t", filter_expression="C")] == [
        b"y"
    ]
    assert broker.consume.describe_group("g").subscriptions == {"t": Subscription("C")}


def test_lookup_by_a_time_carrying_id(broker):
    from cirrusmq.message import new_message_id

    broker.admin.create_topic("t", queues=4)
    ids = [new_message_id() for _ in range(3)]
    broker.produce.send("t", [MessageInput(b"m%d" % i, message_id=i_) for i, i_ in enumerate(ids)])
    assert broker.lookup.lookup("t", ids[2]).body == b"m2"
    stamped = broker.produce.send("t", [MessageInput(b"s")], ProducerStamp("p", 1)).receipts[0]
    assert broker.lookup.lookup("t", stamped.message_id).body == b"s"


def test_describe_shows_what_holds_the_committed_offset(broker, clock):
    create_fifo_topic(broker, "t")  # in place (elsewhere an expired lease moves to retry)
    send(broker, "t", b"a", b"b", message_group="k")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    ack_statuses(broker, "g", [b.receipt_handle])
    clock.advance(11)
    broker.consume.receive("g", "t", invisible_seconds=10)  # a again: attempt 2
    [status] = statuses(broker, "g")
    assert (status.oldest_unacked_offset, status.oldest_unacked_attempt) == (a.message.offset, 2)


def test_a_queue_at_its_flow_control_limit_delivers_again_once_acked(broker, clock, monkeypatch):
    from cirrusmq_broker import limits

    monkeypatch.setattr(limits, "MAX_LEASES_PER_QUEUE", 3)
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"1", b"2", b"3", b"4")
    held = [broker.consume.receive("g", "t", max_messages=1)[0] for _ in range(3)]
    assert broker.consume.receive("g", "t") == []  # 3 leases: the queue waits for acks
    assert ack_statuses(broker, "g", [m.receipt_handle for m in held]) == ["acked"] * 3
    clock.advance(FLOW_RECHECK_SECONDS)  # a queue at its limit is re-checked this often
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"4"]


def test_a_filter_is_bounded(broker):
    from cirrusmq_broker.errors import InvalidFilterExpression

    broker.admin.create_topic("t", queues=1)
    for expression in ["A" * 200, " || ".join(f"T{i}" for i in range(100)), "x" * 800_000]:
        with pytest.raises(InvalidFilterExpression):
            broker.consume.receive("g", "t", filter_expression=expression)


def test_a_contended_queue_is_skipped_not_failed(broker, monkeypatch):
    broker.admin.create_topic("t", queues=2)
    for queue in (0, 1):
        group = next(f"k{i}" for i in range(100) if zlib.crc32(f"k{i}".encode()) % 2 == queue)
        send(broker, "t", b"m", message_group=group)
    original = GroupStateStore.save
    monkeypatch.setattr(
        GroupStateStore,
        "save",
        lambda self, state, *args, **kw: state.queue != 1 and original(self, state, *args, **kw),
    )
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [m.message.queue for m in got] == [0]
    monkeypatch.undo()
    assert [m.message.queue for m in broker.consume.receive("g", "t", max_messages=10)] == [1]


def test_ack_of_many_leases_at_once(broker, clock):
    broker.admin.create_topic("t", queues=1)
    count = 50  # more leases than one condition expression could check
    for i in range(count):
        send(broker, "t", str(i).encode())
    got = [m for _ in range(count) for m in broker.consume.receive("g", "t", max_messages=1)]
    assert len({m.receipt_handle.split(".")[0] for m in got}) == count
    assert ack_statuses(broker, "g", [m.receipt_handle for m in got]) == ["acked"] * count
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (count, 0)


def test_lookup_never_answers_with_another_message(broker, clock):
    broker.admin.create_topic("t1")
    broker.admin.create_topic("t2")
    broker.produce.send("t1", [MessageInput(b"one", message_id="same")])
    broker.produce.send("t2", [MessageInput(b"two", message_id="same")])
    assert broker.lookup.lookup("t1", "same").body == b"one"
    assert broker.lookup.lookup("t2", "same").body == b"two"


def test_an_ack_spanning_more_than_100_queues_is_refused_naming_the_limit(broker):
    signer = ReceiptSigner(broker.settings.receipt_secret)
    handles = [
        signer.encode(ReceiptHandle("g", f"t{q // 64}", q % 64, 0, "lease", 1, 0))
        for q in range(101)
    ]
    with pytest.raises(InvalidRequest) as refused:
        broker.consume.ack("g", handles)
    assert refused.value.details == {"max_queues": 100}  # a client splits the request
    with pytest.raises(InvalidRequest):
        broker.consume.check_ack("g", handles)  # what a receive carrying them checks first
    broker.consume.check_ack("g", handles[:100])
