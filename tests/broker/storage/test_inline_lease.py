"""The lease stored on a queue's summary: a save that changes it does so only if it is as
read, so a save that read it before an ack or a move is refused instead of writing it back
(an acked message delivered again); a save that leaves it alone is not refused by them.
The slot is taken by the first lease made while it is free and by no other."""

from __future__ import annotations

import threading
from dataclasses import replace

import boto3
from broker_helpers import ack_statuses, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.group_state import MAX_INLINE_SPAN, Lease
from cirrusmq_broker.rules.retries import REDELIVERY_IMMEDIATE
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.groups.codec import LEASE_FIELDS, lease_fields
from cirrusmq_broker.storage.groups.keys import LEASE_MARK

INVISIBLE = 10
SAVES = {"UpdateItem", "TransactWriteItems"}


def lease_items(broker) -> int:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.groups_table)["Items"]
    return sum(LEASE_MARK in item["stream"]["S"] for item in items)


def summary_lease(broker):
    return broker.states.load_one("g", "t", 0).inline_lease()


def receive(broker, count: int = 10) -> list:
    return broker.consume.receive("g", "t", invisible_seconds=INVISIBLE, max_messages=count)


def delivered_on_summary(broker) -> tuple:
    """A queue with one message delivered, its lease on the summary, and the state as a
    save that read it then would hold: (the message, that state, the lease)."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"m")
    [m] = receive(broker)
    stale = broker.states.load_one("g", "t", 0)
    return m, stale, stale.inline_lease()


def never_again(broker, clock) -> None:
    for _ in range(3):
        clock.advance(INVISIBLE * 10)
        assert receive(broker) == []  # acked is final


def test_a_save_that_read_the_lease_before_its_ack_removed_it_is_refused(broker, clock):
    m, stale, lease = delivered_on_summary(broker)
    assert lease is not None and lease_items(broker) == 0
    assert ack_statuses(broker, "g", [m.receipt_handle]) == ["acked"]
    assert summary_lease(broker) is None
    stale.postpone(lease.lease_id, clock.now + 3_600_000)
    assert broker.states.save(stale) is False
    never_again(broker, clock)


def test_a_save_that_read_the_lease_before_a_partial_ack_is_refused(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = receive(broker)
    stale = broker.states.load_one("g", "t", 0)
    lease = stale.inline_lease()
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]  # an ADD on the summary
    stale.postpone(lease.lease_id, clock.now + 3_600_000)
    assert broker.states.save(stale) is False  # it would write the lease back without a
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]
    assert summary_lease(broker) is None  # settled whole: removed
    never_again(broker, clock)


def test_the_summary_holds_one_lease_and_frees_it_for_the_next(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b", b"c")
    [a] = receive(broker, 1)
    [b] = receive(broker, 1)  # the summary's slot is taken: an item of its own
    assert (summary_lease(broker).start, lease_items(broker)) == (0, 1)
    assert ack_statuses(broker, "g", [a.receipt_handle, b.receipt_handle]) == ["acked"] * 2
    assert (summary_lease(broker), lease_items(broker)) == (None, 0)
    [c] = receive(broker, 1)
    assert (summary_lease(broker).start, lease_items(broker)) == (2, 0)
    assert ack_statuses(broker, "g", [c.receipt_handle]) == ["acked"]
    [status] = broker.consume.describe_group("g").queues
    assert (status.committed_offset, status.inflight) == (3, 0)
    never_again(broker, clock)


def test_an_expired_summary_lease_moves_its_message_on_once(broker, clock):
    first, stale, lease = delivered_on_summary(broker)
    clock.advance(INVISIBLE + 1)
    assert receive(broker) == []  # the expiry moves m to the retry topic, settling the lease
    assert summary_lease(broker) is None
    stale.postpone(lease.lease_id, clock.now + 3_600_000)
    assert broker.states.save(stale) is False  # it would bring the moved lease back
    deliveries = []
    for _ in range(6):
        clock.advance(60)
        got = receive(broker)
        deliveries += [m.message.body for m in got]
        ack_statuses(broker, "g", [m.receipt_handle for m in got]) if got else None
    assert deliveries == [b"m"]  # redelivered once, from the retry topic
    assert ack_statuses(broker, "g", [first.receipt_handle]) == ["expired"]


def test_an_ack_of_the_summarys_lease_does_not_refuse_a_receive_that_read_before(broker, clock):
    """The ack changes only the lease's attributes: a receive that read the summary before
    it saves at its first attempt, and the ack stands."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    [a] = receive(broker)
    send(broker, "t", b"b")
    paused, resume, answers, saves = threading.Event(), threading.Event(), [], []
    thread_id: list[int] = []

    def observe(service: str, operation: str, params: dict) -> None:
        if threading.get_ident() not in thread_id or operation not in SAVES:
            return
        saves.append(operation)
        if not paused.is_set():
            paused.set()
            assert resume.wait(30)

    def receive_b() -> None:
        thread_id.append(threading.get_ident())
        answers.extend(receive(broker))

    undo = observe_calls(observe)
    try:
        thread = threading.Thread(target=receive_b)
        thread.start()
        assert paused.wait(30)  # it read the summary holding a's lease, and planned b
        assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]
        resume.set()
        thread.join(30)
    finally:
        undo()
    assert [m.message.body for m in answers] == [b"b"]
    assert saves == ["TransactWriteItems"]  # b's lease is an item: the slot read as taken
    assert summary_lease(broker) is None  # the ack stands
    assert ack_statuses(broker, "g", [m.receipt_handle for m in answers]) == ["acked"]
    never_again(broker, clock)


def test_a_wide_lease_is_an_item_of_its_own(broker, clock):
    """A filter's skipped offsets are stored with the lease: one spanning more than
    MAX_INLINE_SPAN offsets would make every later write of the summary dearer."""
    broker.admin.create_topic("t", queues=1)
    skipped = [MessageInput(b"x", tag="b")] * MAX_INLINE_SPAN
    broker.produce.send("t", [*skipped, MessageInput(b"y", tag="a")])
    [m] = broker.consume.receive("g", "t", filter_expression="a", invisible_seconds=INVISIBLE)
    assert (summary_lease(broker), lease_items(broker)) == (None, 1)
    assert ack_statuses(broker, "g", [m.receipt_handle]) == ["acked"]
    assert lease_items(broker) == 0


def test_with_leases_on_summary_off_none_is_made_and_one_made_before_is_settled(settings, clock):
    """Switching LeasesOnSummary off (or running both settings side by side) keeps reading
    and settling the leases stored on summaries while it makes none."""
    on, off = Broker(settings, clock), Broker(replace(settings, leases_on_summary=False), clock)
    on.admin.create_topic("t", queues=1)
    send(on, "t", b"a", b"b")
    [a] = on.consume.receive("g", "t", max_messages=1, invisible_seconds=INVISIBLE)
    assert summary_lease(on) is not None
    [b] = off.consume.receive("g", "t", max_messages=1, invisible_seconds=INVISIBLE)
    assert lease_items(off) == 1  # b's lease: an item, though a's is on the summary
    assert ack_statuses(off, "g", [a.receipt_handle, b.receipt_handle]) == ["acked"] * 2
    send(on, "t", b"c")
    [c] = off.consume.receive("g", "t", invisible_seconds=INVISIBLE)
    assert (summary_lease(off), lease_items(off)) == (None, 1)  # the slot free: still an item
    assert ack_statuses(on, "g", [c.receipt_handle]) == ["acked"]
    never_again(off, clock)


def test_with_leases_on_summary_off_a_redelivery_in_place_moves_the_lease_to_an_item(
    settings, clock
):
    """Off makes no lease on a summary, not even by redelivering one made while on (so a
    rollback's wait for the summaries to be empty ends)."""
    on, off = Broker(settings, clock), Broker(replace(settings, leases_on_summary=False), clock)
    on.admin.create_topic("t", queues=1)
    on.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    send(on, "t", b"a", b"b")
    first = on.consume.receive("g", "t", invisible_seconds=INVISIBLE)
    assert summary_lease(on) is not None
    clock.advance(INVISIBLE)
    again = off.consume.receive("g", "t", invisible_seconds=INVISIBLE, max_messages=1)
    assert [(m.message.offset, m.delivery_attempt) for m in again] == [(0, 2)]
    assert (summary_lease(off), lease_items(off)) == (None, 2)  # the taken part and the rest
    assert ack_statuses(off, "g", [first[0].receipt_handle]) == ["expired"]
    rest = off.consume.receive("g", "t", invisible_seconds=INVISIBLE)
    assert [(m.message.offset, m.delivery_attempt) for m in rest] == [(1, 2)]
    assert ack_statuses(off, "g", [m.receipt_handle for m in again + rest]) == ["acked"] * 2
    assert (summary_lease(off), lease_items(off)) == (None, 0)
    never_again(off, clock)


def test_a_lease_stored_while_an_ack_removes_the_settled_one_stays(broker, clock):
    """An ack's ``ADD`` leaves the summary's lease settled; before its removal, a receive
    finds the slot free and stores its own lease there: the removal, conditional on the
    lease as the ``ADD`` returned it, leaves the new one alone."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = receive(broker)
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]  # an ADD: it stays
    send(broker, "t", b"c")
    got: list = []

    def receive_before_the_removal(service: str, operation: str, params: dict) -> None:
        removal = params.get("UpdateExpression", "").startswith("REMOVE")
        if operation == "UpdateItem" and removal and not got:
            got.extend(receive(broker))

    undo = observe_calls(receive_before_the_removal)
    try:
        assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]  # ADD, removal
    finally:
        undo()
    assert [m.message.body for m in got] == [b"c"]
    assert summary_lease(broker).start == 2  # c's lease stayed
    [status] = broker.consume.describe_group("g").queues
    assert (status.committed_offset, status.inflight) == (2, 1)


def test_a_summary_save_that_frees_the_slot_removes_every_attribute_a_lease_stores() -> None:
    lease = Lease(
        "l1", 0, 8, 1, 1, frozenset({1}), frozenset({2}), frozenset({3}), 4, frozenset({"a"})
    )
    assert set(lease_fields(lease)) == set(LEASE_FIELDS)
