"""Delayed messages on in-process moto: due times, timer items, the scheduler's move,
cancel, idempotent delayed sends and the crash matrix of the move."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from broker_helpers import object_keys, transactions_cancelled
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import (
    AlreadyDelivered,
    DelayNotAllowed,
    InvalidDelay,
    ScheduledMessageNotFound,
    StorageContended,
    TooManyDueTimes,
    TransactionRequired,
)
from cirrusmq_broker.model import MessageInput, MessageType, ProducerStamp
from cirrusmq_broker.rules.delays import DELAY_LEVELS_S, MAX_DELAY_MS, delay_groups
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.storage.clients import observe_calls

GROUP = "g"


@pytest.fixture
def delays(settings, clock, monkeypatch) -> Broker:
    # in-process moto is not thread-safe: the scheduler moves one queue at a time here
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TimersTable" in t)
    return Broker(dataclasses.replace(settings, timers_table=table), clock)


def timer_items(broker: Broker) -> list[dict]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.timers_table)["Items"]
    return [i for i in items if "object_key" in i]


def test_timer_groups_one_per_queue_and_due_second():
    rows = [(0, 1000), (0, 1999), (0, 2000), (1, 2500)]
    groups = delay_groups(rows)
    assert [(g.queue, g.due_ms, g.first_row, g.count) for g in groups] == [
        (0, 1999, 0, 2),
        (0, 2000, 2, 1),
        (1, 2500, 3, 1),
    ]


def test_bad_delays_are_refused_and_store_nothing(delays, clock):
    delays.admin.create_topic("t", queues=2)
    for kind in (MessageType.FIFO, MessageType.TRANSACTION):
        delays.admin.create_topic(kind.value.lower(), queues=2, message_type=kind)
    cases = [
        ("t", {"delay_level": 0}, InvalidDelay),
        ("t", {"delay_level": 19}, InvalidDelay),
        ("t", {"delay_level": 1, "delivery_timestamp": 1}, InvalidDelay),
        ("t", {"delivery_timestamp": clock.now + MAX_DELAY_MS + 1}, InvalidDelay),
        ("fifo", {"delay_level": 3}, DelayNotAllowed),
        ("transaction", {"delay_level": 3}, TransactionRequired),  # plain sends: refused
    ]
    for topic, fields, error in cases:
        with pytest.raises(error):
            delays.produce.send(topic, [MessageInput(b"x", message_group="k", **fields)])
    assert object_keys(delays) == [] and timer_items(delays) == []


def test_too_many_due_seconds_in_one_send_is_refused(delays, clock):
    delays.admin.create_topic("t", queues=1)
    inputs = [MessageInput(b"x", delivery_timestamp=clock.now + 5000 + i * 1000) for i in range(65)]
    with pytest.raises(TooManyDueTimes):
        delays.produce.send("t", inputs)
    assert object_keys(delays) == [] and timer_items(delays) == []


def test_past_due_is_a_plain_append_and_delayed_ones_are_one_object_one_item(delays, clock):
    delays.admin.create_topic("t", queues=1)
    inputs = [
        MessageInput(b"now", delivery_timestamp=clock.now - 1),
        MessageInput(b"zero", delivery_timestamp=0),
        MessageInput(b"later", delay_level=3, message_id="later-1"),
        MessageInput(b"later2", delay_level=3, message_id="later-2"),
    ]
    receipts = delays.produce.send("t", inputs).receipts
    assert [r.offset for r in receipts[:2]] == [0, 1]
    assert receipts[2].offset is None and receipts[2].delivery_timestamp == clock.now + 10_000
    keys = object_keys(delays)
    assert len([k for k in keys if k.startswith("timers/")]) == 1
    assert len(timer_items(delays)) == 1


def test_scheduler_moves_due_messages_never_early(delays, clock):
    delays.admin.create_topic("t", queues=1)
    delays.produce.send("t", [MessageInput(b"a", delay_level=2, message_id="m-a")])
    clock.advance(4.999)
    assert delays.delay_release.tick().moved == 0
    clock.advance(0.001)
    assert delays.delay_release.tick().moved == 1
    assert delays.delay_release.tick().moved == 0
    assert timer_items(delays) == []
    assert not [k for k in object_keys(delays) if k.startswith("timers/")]
    entry = delays.index.entry_at("t", 0, 0)
    got = delays.reader.messages(entry)
    assert [m.message_id for m in got] == ["m-a"]
    assert got[0].system.delivery_timestamp == clock.now


def test_every_level_arrives_on_time(delays, clock):
    delays.admin.create_topic("t", queues=1)
    start = clock.now
    inputs = [
        MessageInput(f"{i}".encode(), delay_level=i, message_id=f"l{i}") for i in range(1, 19)
    ]
    delays.produce.send("t", inputs)
    seen = 0
    for level, seconds in enumerate(DELAY_LEVELS_S, 1):
        clock.now = start + seconds * 1000 - 1
        assert delays.delay_release.tick().moved == 0, level
        clock.now = start + seconds * 1000
        assert delays.delay_release.tick().moved == 1, level
        seen += 1
    assert delays.heads.get("t", 0).next_offset == seen == 18


def test_cancel_before_due_then_idempotent_and_after_delivery_409(delays, clock):
    delays.admin.create_topic("t", queues=1)
    r = delays.produce.send(
        "t",
        [
            MessageInput(b"a", delay_level=3, message_id="x1"),
            MessageInput(b"b", delay_level=3, message_id="x2"),
        ],
    ).receipts
    due = r[0].delivery_timestamp
    delays.delay_cancel.cancel("t", "x1", due)
    delays.delay_cancel.cancel("t", "x1", due)
    with pytest.raises(ScheduledMessageNotFound):
        delays.delay_cancel.cancel("t", "nope", due)
    clock.advance(10)
    assert delays.delay_release.tick().moved == 1
    delays.delay_cancel.cancel("t", "x1", due)  # still idempotent after the move
    with pytest.raises(AlreadyDelivered):
        delays.delay_cancel.cancel("t", "x2", due)


def test_a_cancel_conflicting_with_a_concurrent_write_answers_busy_not_not_found(delays, clock):
    """A cancel whose transaction a concurrent write to the timer item cancelled is not
    taken for a message moved meanwhile: 503 Busy, and a retry cancels it."""
    delays.admin.create_topic("t", queues=1)
    inputs = [MessageInput(b"a", delay_level=3, message_id="x1")]
    [receipt] = delays.produce.send("t", inputs).receipts
    due = receipt.delivery_timestamp
    conflict = transactions_cancelled(delays._dynamodb, "TransactionConflict", "None")
    with conflict as calls, pytest.raises(StorageContended):
        delays.delay_cancel.cancel("t", "x1", due)
    assert calls == ["cancelled"]
    assert delays.delay_cancel.cancel("t", "x1", due) == due
    clock.advance(10)
    assert delays.delay_release.tick().moved == 0


def test_retried_stamped_delayed_send_stores_nothing_twice(delays, clock):
    delays.admin.create_topic("t", queues=2)
    stamp = ProducerStamp("p1", 7)
    inputs = [MessageInput(b"a", delay_level=4), MessageInput(b"b")]
    first = delays.produce.send("t", inputs, stamp)
    clock.advance(2)
    again = delays.produce.send("t", inputs, stamp)
    assert again.duplicate and again.receipts == first.receipts
    assert len(timer_items(delays)) == 1
    assert len([k for k in object_keys(delays) if k.startswith("timers/")]) == 1
    clock.advance(30)
    assert delays.delay_release.tick().moved == 1


def test_straggler_written_after_its_second_was_scanned_is_still_moved(delays, clock):
    delays.admin.create_topic("t", queues=1)
    delays.delay_release.tick()
    due = clock.now + 1000
    clock.advance(1.2)  # the scheduler already passed `due` ...
    assert delays.delay_release.tick().moved == 0
    # ... when a producer that chose `due` earlier commits its item now (a container whose
    # clock reads a second before it)
    late = Broker(delays.settings, lambda: due - 1000)
    late.produce.send("t", [MessageInput(b"late", delivery_timestamp=due)])
    assert delays.delay_release.tick().moved == 1


def test_catch_up_after_an_outage(delays, clock):
    delays.admin.create_topic("t", queues=1)
    delays.delay_release.tick()
    delays.produce.send(
        "t", [MessageInput(b"a", delay_level=1), MessageInput(b"b", delay_level=17)]
    )
    clock.advance(3 * 3600)
    assert delays.delay_release.tick().moved == 2
    clock.advance(3 * 86400)
    delays.produce.send("t", [MessageInput(b"c", delay_level=1)])
    clock.advance(5)
    assert delays.delay_release.tick().moved == 1


class SimulatedCrash(BaseException):
    """The process dies here (not an error any code handles)."""


@contextmanager
def crash_on_call(number: int) -> Iterator[list[str]]:
    """Make the ``number``-th AWS call of the broker (1-based) crash; yields the calls."""
    calls: list[str] = []

    def observer(service: str, operation: str, _params: dict) -> None:
        calls.append(f"{service}.{operation}")
        if len(calls) == number:
            raise SimulatedCrash(operation)

    remove = observe_calls(observer)
    try:
        yield calls
    finally:
        remove()


def _stored_ids(broker: Broker, topic: str) -> list[str]:
    ids = []
    for queue in range(2):
        for base, _key in sorted(broker.index.keys_of(topic, queue)):
            entry = broker.index.entry_at(topic, queue, base)
            ids += [m.message_id for m in broker.reader.messages(entry)]
    return ids


def test_crash_at_every_aws_call_of_the_move_loses_and_duplicates_nothing(delays, settings, clock):
    delays.admin.create_topic("t", queues=2)
    dry = Broker(delays.settings, clock)
    clock_start = clock.now
    # the calls of one move: count them on a dry run of the same scene first
    scene = [
        MessageInput(b"a", delay_level=1, message_id="a", message_group="a"),  # queue 1
        MessageInput(b"b", delay_level=1, message_id="b", message_group="d"),  # queue 0
        MessageInput(b"c", delay_level=2, message_id="c", message_group="d"),
    ]
    dry.produce.send("t", scene, ProducerStamp("dry", 1))
    clock.advance(6)
    with crash_on_call(10_000) as calls:
        dry.delay_release.tick()
    assert calls.count("dynamodb.TransactWriteItems") == 2, calls  # one append per queue
    moved_ids = _stored_ids(delays, "t")
    assert sorted(moved_ids) == ["a", "b", "c"]
    dry.admin.delete_topic("t")
    for number in range(1, len(calls) + 1):
        topic = f"crash{number}"
        delays.admin.create_topic(topic, queues=2)
        clock.now = clock_start + number * 100_000
        delays.produce.send(topic, scene, ProducerStamp(f"p{number}", 1))
        clock.advance(6)
        victim = Broker(delays.settings, clock)
        with crash_on_call(number) as seen, pytest.raises(SimulatedCrash):
            victim.delay_release.tick()
        failed = seen[-1]
        rerun = Broker(delays.settings, clock)
        for _ in range(3):
            rerun.delay_release.tick()
        assert sorted(_stored_ids(rerun, topic)) == ["a", "b", "c"], (number, failed)
        left = [k for k in object_keys(delays) if k.startswith("timers/") and f"p{number}-" in k]
        # A crash after a commit, before the timer object's clean-up (are its other items
        # gone? delete it), leaves it to its lifecycle tier: storage, never a duplicate.
        # (moves of other queues run in parallel: one may commit as another crashes)
        committed = "dynamodb.TransactWriteItems" in seen
        assert not left or committed, (number, failed)


def test_crash_at_every_aws_call_of_a_delayed_send_then_a_retry_stores_once(delays, clock):
    scene = [
        MessageInput(b"now", message_id="now"),
        MessageInput(b"later", delay_level=1, message_id="later"),
    ]
    delays.admin.create_topic("dry", queues=2)
    with crash_on_call(10_000) as calls:
        Broker(delays.settings, clock).produce.send("dry", scene, ProducerStamp("dry", 1))
    assert "dynamodb.TransactWriteItems" in calls, calls
    for number in range(1, len(calls) + 1):
        topic = f"send{number}"
        delays.admin.create_topic(topic, queues=2)
        stamp = ProducerStamp(f"s{number}", 1)
        with crash_on_call(number), pytest.raises(SimulatedCrash):
            Broker(delays.settings, clock).produce.send(topic, scene, stamp)
        retry = Broker(delays.settings, clock)
        retry.produce.send(topic, scene, stamp)
        retry.produce.send(topic, scene, stamp)  # and once more: a duplicate
        clock.advance(2)
        tick = retry.delay_release.tick()
        assert tick.moved >= 1 and sorted(_stored_ids(retry, topic)) == ["later", "now"], number
