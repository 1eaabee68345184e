"""Orderly (FIFO) receive on in-process moto with a fake clock: queue locks, one delivery in
flight per queue, allocation over registered consumers, heartbeat expiry, deregistration,
the size and write cost of registrations."""

from __future__ import annotations

import pytest
from broker_helpers import ack_statuses, send
from cirrusmq_broker.errors import InvalidDuration, MessageGroupRequired, TopicNotFound
from cirrusmq_broker.model import MessageInput, MessageType
from cirrusmq_broker.rules.membership import InvalidClientId


def fifo(broker, name: str = "f", queues: int = 1) -> None:
    broker.admin.create_topic(name, queues=queues, message_type=MessageType.FIFO)


def offsets(received) -> list[int]:
    return [r.message.offset for r in received]


def test_fifo_send_needs_a_message_group(broker):
    fifo(broker)
    with pytest.raises(MessageGroupRequired):
        broker.produce.send("f", [MessageInput(b"x")])


def test_one_delivery_in_flight_per_queue_and_the_lock_owner_gets_the_redelivery(broker, clock):
    fifo(broker)
    send(broker, "f", *[b"%d" % i for i in range(6)], message_group="g1")
    first = broker.consume.receive("G", "f", max_messages=3, client_id="a")
    assert offsets(first) == [0, 1, 2]
    # nothing after them while they are in flight, for anyone
    assert broker.consume.receive("G", "f", client_id="a") == []
    assert broker.consume.receive("G", "f", client_id="b") == []
    clock.advance(61)  # the lease expired; the lock (30 s) too, so b may take over
    again = broker.consume.receive("G", "f", max_messages=10, client_id="a")
    assert offsets(again) == [0, 1, 2] and {r.delivery_attempt for r in again} == {2}
    assert broker.consume.receive("G", "f", client_id="b") == []  # a holds the lock again
    assert ack_statuses(broker, "G", [r.receipt_handle for r in again]) == ["acked"] * 3
    nxt = broker.consume.receive("G", "f", max_messages=10, client_id="a")
    assert offsets(nxt) == [3, 4, 5]


def test_a_locked_queue_gives_a_second_consumer_nothing_until_the_lock_lapses(broker, clock):
    fifo(broker)
    send(broker, "f", b"0", b"1", message_group="g1")
    [m0] = broker.consume.receive("G", "f", max_messages=1, client_id="a")
    broker.consume.ack("G", [m0.receipt_handle])
    assert broker.consume.receive("G", "f", client_id="b") == []  # a's lock holds
    clock.advance(59)
    assert broker.consume.receive("G", "f", client_id="b") == []  # as long as its lease did
    clock.advance(2)
    [m1] = broker.consume.receive("G", "f", client_id="b")
    assert m1.message.offset == 1


def test_groups_consume_the_same_queue_independently(broker):
    fifo(broker)
    send(broker, "f", b"0", b"1", message_group="g1")
    assert offsets(broker.consume.receive("G1", "f", client_id="a")) == [0, 1]
    assert offsets(broker.consume.receive("G2", "f", client_id="b")) == [0, 1]


def test_allocation_rebalance_and_deregistration(broker, clock):
    fifo(broker, queues=4)
    for key in ("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"):
        send(broker, "f", key.encode(), message_group=key)
    ms = broker.membership
    assert ms.heartbeat("G", "a", {"f": "*"}, orderly=True).queues == {"f": [0, 1, 2, 3]}
    assert ms.heartbeat("G", "b", {"f": "*"}, orderly=True).queues == {"f": [2, 3]}
    got_a = broker.consume.receive("G", "f", max_messages=100, client_id="a")
    assert {r.message.queue for r in got_a} <= {0, 1}
    got_b = broker.consume.receive("G", "f", max_messages=100, client_id="b")
    assert {r.message.queue for r in got_b} <= {2, 3}
    statuses = {c.client_id: c.queues for c in ms.consumers("G")}
    assert statuses == {"a": {"f": [0, 1]}, "b": {"f": [2, 3]}}
    broker.consume.ack("G", [r.receipt_handle for r in got_a + got_b])
    # b leaves: deregistration frees its locks at once, a gets every queue
    send(broker, "f", b"late", message_group="k2")
    assert ms.deregister("G", "b") >= 1
    assert ms.heartbeat("G", "a", {"f": "*"}, orderly=True).queues == {"f": [0, 1, 2, 3]}
    late = broker.consume.receive("G", "f", max_messages=100, client_id="a")
    assert [r.message.body for r in late] == [b"late"]


def test_a_silent_consumer_expires_and_its_queues_move(broker, clock):
    fifo(broker, queues=2)
    ms = broker.membership
    ms.heartbeat("G", "a", {"f": "*"}, orderly=True, heartbeat_timeout_seconds=10)
    ms.heartbeat("G", "b", {"f": "*"}, orderly=True, heartbeat_timeout_seconds=10)
    assert [c.client_id for c in ms.consumers("G")] == ["a", "b"]
    clock.advance(8)
    ms.heartbeat("G", "b", {"f": "*"}, orderly=True, heartbeat_timeout_seconds=10)
    clock.advance(3)
    assert [c.client_id for c in ms.consumers("G")] == ["b"]
    assert ms.consumers("G")[0].queues == {"f": [0, 1]}


def test_rebalanced_queue_is_taken_over_once_nothing_is_in_flight(broker, clock):
    fifo(broker, queues=2)
    ms = broker.membership
    ms.heartbeat("G", "a", {"f": "*"}, orderly=True)
    keys = {0: None, 1: None}
    for i in range(50):
        keys[_queue_of(f"k{i}", 2)] = keys[_queue_of(f"k{i}", 2)] or f"k{i}"
    send(broker, "f", b"x", b"y", message_group=keys[1])
    [x] = broker.consume.receive("G", "f", max_messages=1, client_id="a")
    ms.heartbeat("G", "b", {"f": "*"}, orderly=True)  # b joins: queue 1 moves to b
    assert broker.consume.receive("G", "f", client_id="b") == []  # x is in flight with a
    broker.consume.ack("G", [x.receipt_handle])
    clock.advance(1)
    [y] = broker.consume.receive("G", "f", client_id="b")
    assert y.message.body == b"y"


def test_change_invisible_zero_redelivers_the_whole_lease_on_fifo_only(broker):
    fifo(broker)
    send(broker, "f", b"0", b"1", b"2", message_group="g1")
    got = broker.consume.receive("G", "f", max_messages=3, client_id="a")
    broker.consume.ack("G", [got[0].receipt_handle])
    broker.consume.change_invisible("G", got[1].receipt_handle, 0)
    again = broker.consume.receive("G", "f", max_messages=3, client_id="a")
    assert offsets(again) == [1, 2] and again[0].delivery_attempt == 2
    broker.admin.create_topic("n", queues=1)
    send(broker, "n", b"x")
    [n] = broker.consume.receive("G", "n")
    with pytest.raises(InvalidDuration):
        broker.consume.change_invisible("G", n.receipt_handle, 0)


def test_bad_input(broker):
    fifo(broker)
    with pytest.raises(InvalidClientId):
        broker.consume.receive("G", "f", client_id="bad id")
    with pytest.raises(InvalidClientId):
        broker.membership.heartbeat("G", "x" * 200, {"f": "*"})
    with pytest.raises(InvalidDuration):
        broker.membership.heartbeat("G", "a", {"f": "*"}, heartbeat_timeout_seconds=1)
    with pytest.raises(TopicNotFound):
        broker.membership.heartbeat("G", "a", {"nope": "*"})
    assert broker.membership.consumers("G") == []


def _queue_of(group: str, queues: int) -> int:
    import zlib

    return zlib.crc32(group.encode()) % queues


def test_a_slow_orderly_batch_renewed_by_its_consumer_is_never_redelivered(broker, clock):
    """The SDK's side of a slow orderly batch (cirrusmq.consumer.orderly): ack in groups, extend the
    whole FIFO lease before it ends; the old handles still ack."""
    from cirrusmq_broker.model import MessageInput, MessageType

    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"%d" % i, message_group="k") for i in range(3)])
    batch = broker.consume.receive("g", "f", max_messages=3, invisible_seconds=10, client_id="c1")
    assert len(batch) == 3
    acked = broker.consume.ack("g", [batch[0].receipt_handle])
    assert [o.status.value for o in acked] == ["acked"]
    clock.advance(6)
    broker.consume.change_invisible("g", batch[1].receipt_handle, 10)
    clock.advance(6)  # past the first deadline
    assert broker.consume.receive("g", "f", max_messages=3, client_id="c1") == []
    acked = broker.consume.ack("g", [r.receipt_handle for r in batch[1:]])
    assert [o.status.value for o in acked] == ["acked", "acked"]
    clock.advance(60)
    assert broker.consume.receive("g", "f", max_messages=3, client_id="c1") == []
    assert broker.dead_letters.list("g").dead_letters == []


def test_an_oversized_registration_is_refused_with_a_4xx_and_nothing_stored(broker, clock):
    from cirrusmq_broker.rules.membership import RegistryTooLarge

    topics = [f"t{i:02d}" + "x" * 120 for i in range(32)]
    for t in topics:
        broker.admin.create_topic(t, queues=1)
    expression = " || ".join(f"{i:02d}" + "y" * 126 for i in range(63))
    subs = {t: expression for t in topics}
    broker.membership.heartbeat("g", "c1", subs)
    with pytest.raises(RegistryTooLarge) as info:
        broker.membership.heartbeat("g", "c2", subs)
    assert info.value.http_status == 400
    assert [c.client_id for c in broker.membership.consumers("g")] == ["c1"]


def test_a_heartbeat_writes_only_when_half_its_timeout_has_passed(broker, clock):
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("t", queues=1)
    writes: list[str] = []
    remove = observe_calls(
        lambda service, op, _: writes.append(op) if op in ("PutItem", "UpdateItem") else None
    )
    try:
        broker.membership.heartbeat("g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60)
        assert writes == ["PutItem"]
        for _ in range(2):
            clock.advance(10)
            status = broker.membership.heartbeat(
                "g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60
            )
        assert writes == ["PutItem"]  # 20 s in: still registered for 40 s more
        assert status.expires_at == clock.now + 40_000
        clock.advance(11)
        broker.membership.heartbeat("g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60)
        assert writes == ["PutItem", "PutItem"]
        broker.membership.heartbeat("g", "c1", {"t": "tag"}, heartbeat_timeout_seconds=60)
        assert len(writes) == 3  # a changed subscription is written at once
    finally:
        remove()


def test_a_deregistration_writes_only_the_queues_it_holds(broker, clock):
    from cirrusmq_broker.model import MessageInput, MessageType
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("f", queues=8, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"x", message_group="k")])
    broker.membership.heartbeat("g", "a", {"f": "*"}, orderly=True)
    got = broker.consume.receive("g", "f", max_messages=8, client_id="a")
    assert len(got) == 1
    updates: list[str] = []
    remove = observe_calls(
        lambda service, op, _: updates.append(op) if op == "UpdateItem" else None
    )
    try:
        assert broker.membership.deregister("g", "a") == 1
    finally:
        remove()
    assert updates == ["UpdateItem"]  # the one lock; not one write per queue
    states, _ = broker.states.list_group("g")
    assert all(s.lock_owner is None for s in states)


def test_a_deregistration_needs_the_permission_for_the_members_topics(broker, clock):
    from cirrusmq_broker.errors import AccessDenied

    broker.admin.create_topic("t", queues=1)
    broker.membership.heartbeat("g", "a", {"t": "*"})
    with pytest.raises(AccessDenied):
        broker.membership.deregister("g", "a", may_subscribe=lambda topic: topic != "t")
    assert [c.client_id for c in broker.membership.consumers("g")] == ["a"]
    assert broker.membership.deregister("g", "a", may_subscribe=lambda topic: True) == 0
    assert broker.membership.consumers("g") == []


def test_a_fifo_queue_in_flight_is_rechecked_less_and_less_often(broker, clock, monkeypatch):
    from types import SimpleNamespace

    from cirrusmq_broker.model import MessageInput, MessageType
    from cirrusmq_broker.services.delivery import queue_plan
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"%d" % i, message_group="k") for i in range(2)])
    assert broker.consume.receive("g", "f", max_messages=1, invisible_seconds=60, client_id="a")
    seconds = [1000.0]
    fake = SimpleNamespace(monotonic=lambda: seconds[0], sleep=lambda s: None)
    monkeypatch.setattr(queue_plan, "time", fake)
    queries: list[str] = []
    remove = observe_calls(lambda service, op, _: queries.append(op) if op == "Query" else None)
    try:
        for _ in range(20):  # a poll a second for 20 s while the delivery is in flight
            assert broker.consume.receive("g", "f", client_id="a") == []
            seconds[0] += 1.0
    finally:
        remove()
    assert len(queries) <= 11  # re-read after 1, then every 2 s; not every second
