"""Exactly-once consume -> produce: a step acks what it read and appends what it produced in
one DynamoDB transaction, or does neither.

The crash matrix fails each AWS call of a step in turn (the Lambda dies there), then looks
at what is stored before and after the client's retry of the same step.
"""

from __future__ import annotations

import dataclasses
import itertools

import boto3
import pytest
from broker_helpers import (
    Crash,
    ack_statuses,
    commit_then_crash,
    create_fifo_topic,
    object_keys,
    send,
    stream_count,
)
from cirrusmq_broker.clock import wall_ms
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import (
    AccessDenied,
    IdempotencyConflict,
    InvalidReceiptHandle,
    LeaseMovedOn,
    ProducerFenced,
    StepTooLarge,
    StorageContended,
    StorageUnavailable,
    Throttled,
)
from cirrusmq_broker.model import MessageInput, MessageType
from cirrusmq_broker.rules.transaction_state import REGISTRATION_KEEP_SECONDS
from cirrusmq_broker.services.consume_produce import MAX_STEP_ITEMS, Step
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.transactions import TransactionStore

_names = itertools.count()


@pytest.fixture
def broker(settings, clock, monkeypatch) -> Broker:
    """A broker with the transactions' and the delay items' tables (in-process moto: the
    release moves one queue at a time)."""
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)
    tables = boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"]
    return Broker(
        dataclasses.replace(
            settings,
            transactions_table=next(t for t in tables if "TransactionsTable" in t),
            timers_table=next(t for t in tables if "TimersTable" in t),
        ),
        clock,
    )


def scene(broker, *, queues: int = 1, bodies: tuple[bytes, ...] = (b"a", b"b")):
    """An input topic with ``bodies``, received by a group; an output topic; a producer."""
    n = next(_names)
    source, sink, group = f"in{n}", f"out{n}", f"g{n}"
    broker.admin.create_topic(source, queues=1)
    broker.admin.create_topic(sink, queues=queues)
    send(broker, source, *bodies)
    got = broker.consume.receive(group, source, max_messages=len(bodies), invisible_seconds=30)
    epoch = broker.transactions.register(f"pg{n}", "stage-1")
    return source, sink, group, got, (f"pg{n}", "stage-1", epoch)


def step(producer, group, handles, outputs, sequence: int = 0) -> Step:
    producer_group, transactional_id, epoch = producer
    return Step(
        producer_group=producer_group,
        transactional_id=transactional_id,
        epoch=epoch,
        sequence=sequence,
        group=group,
        receipt_handles=tuple(handles),
        outputs=tuple((topic, tuple(inputs)) for topic, inputs in outputs),
    )


def bodies_in(broker, group: str, topic: str) -> list[bytes]:
    """What a group receives from ``topic`` (acked)."""
    got = broker.consume.receive(group, topic, max_messages=100)
    if got:
        broker.consume.ack(group, [m.receipt_handle for m in got])
    return sorted(m.message.body for m in got)


def unsettled(broker, group: str, topic: str) -> int:
    return sum(s.inflight for s in broker.consume.describe_group(group).queues if s.topic == topic)


def test_a_step_acks_its_input_and_appends_its_output_at_once(broker, clock):
    source, sink, group, got, producer = scene(broker)
    handles = [m.receipt_handle for m in got]
    outputs = [(sink, [MessageInput(b"A"), MessageInput(b"B")])]

    result = broker.consume_produce.commit(step(producer, group, handles, outputs))

    assert (result.acked, result.duplicate) == (2, False)
    assert [r.offset for r in result.receipts] == [0, 1]
    assert unsettled(broker, group, source) == 0
    clock.advance(60)
    assert broker.consume.receive(group, source, max_messages=10) == []  # nothing comes back
    assert bodies_in(broker, "reader", sink) == [b"A", b"B"]


def test_a_partial_ack_of_a_lease_settles_only_those_messages(broker, clock):
    source, sink, group, got, producer = scene(broker)
    broker.consume_produce.commit(
        step(producer, group, [got[0].receipt_handle], [(sink, [MessageInput(b"A")])])
    )
    broker.consume_produce.commit(
        step(producer, group, [got[1].receipt_handle], [(sink, [MessageInput(b"B")])], 1)
    )
    assert unsettled(broker, group, source) == 0
    assert bodies_in(broker, "reader", sink) == [b"A", b"B"]


def test_one_step_appends_to_normal_fifo_and_transaction_topics(broker, clock):
    source, sink, group, got, producer = scene(broker, queues=4)
    fifo, txn = f"{sink}-fifo", f"{sink}-txn"
    create_fifo_topic(broker, fifo, queues=4)
    broker.admin.create_topic(txn, queues=2, message_type=MessageType.TRANSACTION.value)
    outputs = [
        (sink, [MessageInput(b"n")]),
        (fifo, [MessageInput(b"f1", message_group="k1"), MessageInput(b"f2", message_group="k2")]),
        (txn, [MessageInput(b"t")]),
    ]
    result = broker.consume_produce.commit(
        step(producer, group, [m.receipt_handle for m in got], outputs)
    )

    assert len(result.receipts) == 4
    assert bodies_in(broker, "r", sink) == [b"n"]
    assert bodies_in(broker, "r", fifo) == [b"f1", b"f2"]
    assert bodies_in(broker, "r", txn) == [b"t"]


def test_a_delayed_output_is_scheduled_by_the_step_and_released_when_due(broker, clock):
    source, sink, group, got, producer = scene(broker)
    outputs = [(sink, [MessageInput(b"now"), MessageInput(b"later", delay_level=2)])]
    request = step(producer, group, [m.receipt_handle for m in got], outputs)
    result = broker.consume_produce.commit(request)

    assert result.receipts[1].offset is None and result.receipts[1].delivery_timestamp
    assert broker.consume_produce.commit(request).receipts == result.receipts
    assert bodies_in(broker, "r", sink) == [b"now"]
    clock.advance(5)
    assert broker.delay_release.tick().moved == 1
    assert bodies_in(broker, "r", sink) == [b"later"]


def test_a_lease_that_moved_on_refuses_the_step_and_its_object_is_swept(broker, clock, s3_clock):
    source, sink, group, got, producer = scene(broker)
    clock.advance(31)
    broker.consume.receive(group, source, max_messages=10)  # the expiry moves them to retry
    before = set(object_keys(broker))

    with pytest.raises(LeaseMovedOn) as refused:
        broker.consume_produce.commit(
            step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
        )

    assert refused.value.http_status == 409
    assert refused.value.details["receipt_handles"] == [0, 1]
    assert stream_count(broker, f"{sink}#") == 0
    [orphan] = set(object_keys(broker)) - before  # written, never indexed: nobody reads it
    assert orphan.startswith(f"topics/topic={sink}/") or f"topic={sink}/" in orphan
    assert bodies_in(broker, "reader", sink) == []
    clock.advance(3600)  # past the sweeper's grace period
    broker.janitor.sweep_orphans()
    assert orphan not in object_keys(broker)


def test_a_lease_past_its_deadline_refuses_the_step(broker, clock):
    source, sink, group, got, producer = scene(broker)
    clock.advance(31)  # nothing moved it yet: its deadline alone refuses the step
    with pytest.raises(LeaseMovedOn):
        broker.consume_produce.commit(
            step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
        )
    assert stream_count(broker, f"{sink}#") == 0


def test_a_fenced_producer_epoch_refuses_the_step(broker, clock):
    source, sink, group, got, producer = scene(broker)
    broker.transactions.register(producer[0], producer[1])  # a newer instance took over

    with pytest.raises(ProducerFenced):
        broker.consume_produce.commit(
            step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
        )

    assert stream_count(broker, f"{sink}#") == 0
    assert unsettled(broker, group, source) == 2


def test_a_retried_step_answers_its_first_result_and_appends_once(broker, clock):
    source, sink, group, got, producer = scene(broker)
    request = step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
    first = broker.consume_produce.commit(request)
    clock.advance(60)  # past the leases' deadline: the record answers, not the leases

    again = broker.consume_produce.commit(request)

    assert again.duplicate and again.receipts == first.receipts
    assert stream_count(broker, f"{sink}#") == 1


def test_a_retry_with_changed_inputs_is_refused_and_appends_nothing(broker, clock):
    source, sink, group, got, producer = scene(broker, bodies=(b"a", b"b", b"c"))
    handles = [m.receipt_handle for m in got]
    broker.consume_produce.commit(
        step(producer, group, handles[:1], [(sink, [MessageInput(b"A")])])
    )

    changed = step(producer, group, handles[1:], [(sink, [MessageInput(b"B")])])
    with pytest.raises(IdempotencyConflict):
        broker.consume_produce.commit(changed)

    assert stream_count(broker, f"{sink}#") == 1
    assert unsettled(broker, group, source) == 2  # the changed step's acks did not happen


def test_a_step_too_big_for_one_transaction_is_refused_before_anything_is_stored(broker):
    source, sink, group, got, producer = scene(broker, queues=64)
    fifo = f"{sink}-fifo"
    create_fifo_topic(broker, fifo, queues=64)
    many = [MessageInput(b"x", message_group=f"k{i}") for i in range(400)]  # ~64 queues
    before = object_keys(broker)

    with pytest.raises(StepTooLarge) as refused:
        broker.consume_produce.commit(
            step(producer, group, [m.receipt_handle for m in got], [(fifo, many)])
        )

    assert refused.value.http_status == 400
    assert refused.value.details["max_items"] == MAX_STEP_ITEMS
    assert object_keys(broker) == before
    assert unsettled(broker, group, source) == 2


def test_a_forged_receipt_handle_is_refused_before_anything_is_stored(broker):
    source, sink, group, got, producer = scene(broker)
    before = object_keys(broker)
    with pytest.raises(InvalidReceiptHandle):
        broker.consume_produce.commit(
            step(producer, group, ["forged"], [(sink, [MessageInput(b"A")])])
        )
    assert object_keys(broker) == before


def failing_at(n: int, action, fault: type[BaseException]) -> bool:
    """Run ``action`` with ``fault`` raised before its ``n``-th AWS call; True if raised."""
    count = itertools.count()

    def observer(service: str, operation: str, _: object) -> None:
        if next(count) == n:
            raise fault("injected before the call")

    remove = observe_calls(observer)
    try:
        action()
    except fault:
        return True
    finally:
        remove()
    return False


@pytest.mark.parametrize("fault", [Crash, Throttled], ids=["crash", "throttle"])
def test_a_step_failing_at_any_aws_call_leaves_both_effects_or_neither(broker, clock, fault):
    def prepare():
        source, sink, group, got, producer = scene(broker)
        other = f"{sink}x"
        broker.admin.create_topic(other, queues=1)
        request = step(
            producer,
            group,
            [m.receipt_handle for m in got],
            [(sink, [MessageInput(b"A")]), (other, [MessageInput(b"B")])],
        )
        return source, sink, group, request

    def appended(sink: str) -> int:
        return stream_count(broker, f"{sink}#") + stream_count(broker, f"{sink}x#")

    def calls(request: Step) -> list[str]:
        seen: list[str] = []
        remove = observe_calls(lambda service, operation, _: seen.append(operation))
        try:
            broker.consume_produce.commit(request)
        finally:
            remove()
        return seen

    seen = calls(prepare()[3])
    assert seen.count("PutObject") == 2 and "TransactWriteItems" in seen, seen

    for n in range(len(seen)):
        source, sink, group, request = prepare()
        failed = failing_at(n, lambda r=request: broker.consume_produce.commit(r), fault)
        # the last call keeps the registration, after the commit: a throttle there is absorbed
        absorbed = fault is Throttled and n == len(seen) - 1 and seen[n] == "UpdateItem"
        assert failed or absorbed, n
        acked = unsettled(broker, group, source) == 0
        assert (appended(sink), acked) in ((0, False), (2, True)), f"call {n}: {seen[n]}"
        broker.consume_produce.commit(request)  # the client's retry
        assert appended(sink) == 2, f"call {n}: {seen[n]}"
        assert unsettled(broker, group, source) == 0
    print(f"\nconsume -> produce step: {len(seen)} AWS calls failed in turn ({fault.__name__})")


def test_a_step_whose_answer_is_lost_after_its_commit_is_answered_by_its_retry(
    broker, clock, monkeypatch
):
    source, sink, group, got, producer = scene(broker)
    request = step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
    commit_then_crash(monkeypatch, broker, request)

    again = broker.consume_produce.commit(request)
    assert again.duplicate and [r.offset for r in again.receipts] == [0]
    assert stream_count(broker, f"{sink}#") == 1
    assert unsettled(broker, group, source) == 0


def test_a_step_acking_a_fifo_delivery_lets_its_message_group_go_on(broker, clock):
    n = next(_names)
    source, sink, group = f"fin{n}", f"fout{n}", f"fg{n}"
    create_fifo_topic(broker, source)
    broker.admin.create_topic(sink, queues=1)
    send(broker, source, b"1", b"2", message_group="k")
    [first] = broker.consume.receive(group, source, max_messages=1)
    assert broker.consume.receive(group, source, max_messages=10) == []  # the group waits
    producer = (f"pg{n}", "stage-1", broker.transactions.register(f"pg{n}", "stage-1"))

    broker.consume_produce.commit(
        step(producer, group, [first.receipt_handle], [(sink, [MessageInput(b"1'")])])
    )

    [second] = broker.consume.receive(group, source, max_messages=10)
    assert second.message.body == b"2"


def test_a_step_acking_two_deliveries_of_one_lease_slot_is_refused(broker, clock):
    n = next(_names)
    source, sink, group = f"fin{n}", f"fout{n}", f"fg{n}"
    create_fifo_topic(broker, source)
    broker.admin.create_topic(sink, queues=1)
    send(broker, source, b"1", message_group="k")
    [old] = broker.consume.receive(group, source, max_messages=1, invisible_seconds=10)
    clock.advance(11)
    [new] = broker.consume.receive(group, source, max_messages=1)  # redelivered in place
    producer = (f"pg{n}", "stage-1", broker.transactions.register(f"pg{n}", "stage-1"))

    with pytest.raises(LeaseMovedOn):
        broker.consume_produce.commit(
            step(
                producer,
                group,
                [old.receipt_handle, new.receipt_handle],
                [(sink, [MessageInput(b"1'")])],
            )
        )
    assert stream_count(broker, f"{sink}#") == 0


def test_a_zombie_whose_fifo_message_was_redelivered_in_place_is_refused(broker, clock):
    n = next(_names)
    source, sink, group = f"fin{n}", f"fout{n}", f"fg{n}"
    create_fifo_topic(broker, source)
    broker.admin.create_topic(sink, queues=1)
    send(broker, source, b"1", message_group="k")
    [zombie] = broker.consume.receive(group, source, max_messages=1, invisible_seconds=10)
    clock.advance(11)
    [live] = broker.consume.receive(group, source, max_messages=1)  # same lease item, new id
    producer = (f"pg{n}", "stage-1", broker.transactions.register(f"pg{n}", "stage-1"))

    with pytest.raises(LeaseMovedOn):
        broker.consume_produce.commit(
            step(producer, group, [zombie.receipt_handle], [(sink, [MessageInput(b"z")])])
        )
    assert stream_count(broker, f"{sink}#") == 0

    broker.consume_produce.commit(
        step(producer, group, [live.receipt_handle], [(sink, [MessageInput(b"1'")])], 1)
    )
    assert bodies_in(broker, "reader", sink) == [b"1'"]


def test_a_warm_step_costs_one_put_per_output_queue_and_one_transaction(broker, clock):
    source, sink, group, got, producer = scene(broker, bodies=(b"a", b"b", b"c"))
    broker.consume_produce.commit(  # warms the caches (topics, queue heads)
        step(producer, group, [got[0].receipt_handle], [(sink, [MessageInput(b"A")])])
    )
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}.{operation}"))
    try:
        broker.consume_produce.commit(  # acks the rest of the lease: then it is deleted
            step(
                producer,
                group,
                [m.receipt_handle for m in got[1:]],
                [(sink, [MessageInput(b"B")])],
                1,
            )
        )
    finally:
        remove()
    assert seen == [
        "s3.PutObject",
        "dynamodb.TransactWriteItems",
        "dynamodb.UpdateItem",  # the lease acked in part: its settled set again, then ...
        "dynamodb.UpdateItem",  # ... its removal from the summary, as a plain ack does
    ], seen


def test_a_stage_that_only_commits_steps_keeps_its_registration(broker, clock):
    """A live stage never polls for checks: its steps keep its registration (a registration
    that expires is deleted, and registering the id again starts over at epoch 1)."""
    source, sink, group, got, producer = scene(broker)
    clock.advance(REGISTRATION_KEEP_SECONDS - 24 * 3600)  # the stage ran for 29 days
    got = broker.consume.receive(group, source, max_messages=2, invisible_seconds=30)

    broker.consume_produce.commit(
        step(producer, group, [m.receipt_handle for m in got], [(sink, [MessageInput(b"A")])])
    )

    store = TransactionStore(
        boto3.client("dynamodb", region_name="us-east-1"), broker.settings.transactions_table
    )
    epoch, expires_at, _ = store.registration_of(producer[0], producer[1])
    assert epoch == producer[2]
    assert expires_at >= clock() // 1000 + REGISTRATION_KEEP_SECONDS - 24 * 3600


def test_a_retry_after_its_output_topic_was_recreated_with_more_queues_is_refused(broker, clock):
    """The step's record names the bases of the queues it appended to then: the recreated
    topic routes the same messages to other queues, so the record answers nothing of them."""
    source, _, group, got, producer = scene(broker)
    sink = f"fifo{next(_names)}"
    create_fifo_topic(broker, sink, queues=1)
    outputs = [(sink, [MessageInput(b"%d" % n, message_group=f"k{n}") for n in range(8)])]
    request = step(producer, group, [m.receipt_handle for m in got], outputs)
    broker.consume_produce.commit(request)  # its answer is lost
    broker.admin.delete_topic(sink)
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == [sink]
    create_fifo_topic(broker, sink, queues=8)

    with pytest.raises(IdempotencyConflict):
        broker.consume_produce.commit(request)


def test_a_crash_past_the_commit_leaves_no_fifo_group_waiting_for_the_lease_deadline(broker, clock):
    """The step's commit settled the rest of a FIFO lease, and the process died before the
    lease's delete: the lease holds nothing unsettled, so the message group goes on now,
    not at the lease's deadline, and the retry answers the first result."""
    n = next(_names)
    source, sink, group = f"fin{n}", f"fout{n}", f"fg{n}"
    create_fifo_topic(broker, source)
    broker.admin.create_topic(sink, queues=1)
    send(broker, source, b"1", b"2", b"3", message_group="k")
    first, second = broker.consume.receive(group, source, max_messages=2, invisible_seconds=3600)
    broker.consume.ack(group, [first.receipt_handle])
    producer = (f"pg{n}", "stage-1", broker.transactions.register(f"pg{n}", "stage-1"))
    request = step(producer, group, [second.receipt_handle], [(sink, [MessageInput(b"2'")])])
    seen: list[str] = []

    def die_after_the_commit(service: str, operation: str, _: object) -> None:
        if "TransactWriteItems" in seen:
            raise Crash()
        seen.append(operation)

    remove = observe_calls(die_after_the_commit)
    try:
        with pytest.raises(Crash):
            broker.consume_produce.commit(request)
    finally:
        remove()

    assert broker.consume_produce.commit(request).duplicate
    [third] = broker.consume.receive(group, source, max_messages=10)
    assert third.message.body == b"3"


def commit_failing_after_it(broker, producer, group, sink, acked, fault):
    """Commit a step acking ``acked`` with one message to ``sink``, every UpdateItem after
    its transaction raising ``fault``; its result."""
    seen: list[str] = []

    def fail_after_the_commit(service: str, operation: str, _: object) -> None:
        if "TransactWriteItems" in seen and operation == "UpdateItem":
            raise fault("injected")
        seen.append(operation)

    remove = observe_calls(fail_after_the_commit)
    try:
        return broker.consume_produce.commit(
            step(producer, group, [m.receipt_handle for m in acked], [(sink, [MessageInput(b"A")])])
        )
    finally:
        remove()


@pytest.mark.parametrize("fault", [Throttled, StorageUnavailable], ids=["throttle", "down"])
def test_a_committed_step_answers_its_result_when_keeping_the_registration_fails(
    broker, clock, fault
):
    """Keeping the registration alive comes after the commit: its failure is no failure of
    the step (a later step keeps it)."""
    source, sink, group, got, producer = scene(broker)
    result = commit_failing_after_it(broker, producer, group, sink, got, fault)
    assert not result.duplicate and [r.offset for r in result.receipts] == [0]


@pytest.mark.parametrize("fault", [Throttled, StorageContended], ids=["throttle", "contended"])
def test_a_committed_step_answers_its_result_when_tidying_its_lease_fails(broker, clock, fault):
    """A step acking part of a lease tidies it after the commit (the plain ack's ``ADD``
    again): a refusal of that leaves it to the next read, and the step still answers."""
    source, sink, group, got, producer = scene(broker)
    result = commit_failing_after_it(broker, producer, group, sink, got[:1], fault)
    assert not result.duplicate and [r.offset for r in result.receipts] == [0]
    assert unsettled(broker, group, source) == 1
    assert ack_statuses(broker, group, [got[1].receipt_handle]) == ["acked"]
    assert unsettled(broker, group, source) == 0


def test_a_key_that_may_not_publish_learns_nothing_of_which_output_topics_exist(broker, clock):
    """As a send to a topic the key may not publish to, a step's output to one is 403
    whether or not the topic exists (a 404 would tell it apart)."""
    source, sink, group, got, producer = scene(broker)
    handles = [m.receipt_handle for m in got]
    for name in (sink, f"{sink}-none"):
        with pytest.raises(AccessDenied):
            broker.consume_produce.commit(
                step(producer, group, handles, [(name, [MessageInput(b"A")])]),
                may_publish=lambda topic: False,
            )
    assert unsettled(broker, group, source) == 2


def test_a_message_of_a_traced_topic_acked_by_a_step_is_traced_as_acked(broker, clock):
    clock.now = wall_ms()
    n = next(_names)
    source, sink, group = f"tin{n}", f"tout{n}", f"tg{n}"
    broker.admin.create_topic(source, queues=1, trace=True)
    broker.admin.create_topic(sink, queues=1)
    with broker.trace.request():
        (receipt,) = broker.produce.send(source, [MessageInput(b"m")]).receipts
    with broker.trace.request():
        (got,) = broker.consume.receive(group, source, max_messages=1)
    producer = (f"pg{n}", "stage-1", broker.transactions.register(f"pg{n}", "stage-1"))

    with broker.trace.request():
        broker.consume_produce.commit(
            step(producer, group, [got.receipt_handle], [(sink, [MessageInput(b"m'")])])
        )

    kinds = [e["kind"] for e in broker.trace_reader.trace_message(source, receipt.message_id)]
    assert kinds == ["sent", "delivered", "acked"]
