"""Dead-letter destinations and move tasks are broker moves on the one fenced append path:
two containers (separate caches, one moto backend, one clock), with what another container
does (a delete, a cancel) or a dying runner landing between a task's steps."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from broker_helpers import cancellation, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import InvalidRequest, MoveTaskNotFound, MoveTaskRunning
from cirrusmq_broker.services.move_tasks import MoveTaskId
from cirrusmq_broker.services.moves import MoveAppender
from cirrusmq_broker.storage.dynamo import to_item
from cirrusmq_broker.storage.move_tasks import (
    CANCELLED,
    COMPLETED,
    REGISTRY_GROUP,
    RUNNING,
    MoveTask,
)

SOURCE, DLQ, BACK = "src", "dead", "back"
GROUP, DLQ_GROUP = "g", "gdead"


class Crash(BaseException):
    """The runner's process dies here."""


@pytest.fixture
def other(settings, clock) -> Broker:
    """A second container."""
    return Broker(settings, clock)


def dead_letters_in_destination(broker, clock, bodies: list[bytes]) -> None:
    """``bodies`` sent to SOURCE die once (max 1 attempt) into DLQ, GROUP's destination."""
    for name in (SOURCE, DLQ, BACK):
        broker.admin.create_topic(name, queues=2)
    broker.retries.set_max_delivery_attempts(GROUP, 1)
    broker.retries.set_dead_letter_destination(GROUP, DLQ, {"from": SOURCE})
    send(broker, SOURCE, *bodies)
    while broker.consume.receive(GROUP, SOURCE, max_messages=100, invisible_seconds=10):
        pass
    clock.advance(11)
    assert broker.consume.receive(GROUP, SOURCE) == []  # the expiry moves them on


def drain(broker, clock, group: str, topic: str) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(3):
        while batch := broker.consume.receive(group, topic, max_messages=100):
            got += [r.message.body for r in batch]
            broker.consume.ack(group, [r.receipt_handle for r in batch])
        clock.advance(7200)  # past any lease and backoff
    return sorted(got)


def start(broker, **options):
    return broker.move_tasks.start(
        DLQ_GROUP, DLQ, route_property="from", routes={SOURCE: BACK}, **options
    )


def test_a_dead_letter_is_appended_to_the_groups_destination(broker, clock) -> None:
    dead_letters_in_destination(broker, clock, [b"a", b"b"])
    received = broker.consume.receive(DLQ_GROUP, DLQ, max_messages=10)
    assert sorted(r.message.body for r in received) == [b"a", b"b"]
    assert all(r.message.properties["from"] == SOURCE for r in received)
    assert all(r.delivery_attempt == 1 for r in received)  # a message of its own there
    assert broker.dead_letters.list(GROUP).dead_letters == []  # not in dlq.<group>


def test_a_cleared_destination_sends_dead_letters_to_the_groups_dead_letter_topic(
    broker, clock
) -> None:
    broker.admin.create_topic(SOURCE, queues=1)
    broker.retries.set_max_delivery_attempts(GROUP, 1)
    broker.retries.set_dead_letter_destination(GROUP, None)
    send(broker, SOURCE, b"a")
    broker.consume.receive(GROUP, SOURCE, invisible_seconds=10)
    clock.advance(11)
    broker.consume.receive(GROUP, SOURCE)
    assert [d.message.body for d in broker.dead_letters.list(GROUP).dead_letters] == [b"a"]


def test_an_ack_landing_before_a_dead_letter_move_keeps_it_out_of_the_destination(
    broker, other, clock, monkeypatch
) -> None:
    """The last attempt's lease expired; while a receive's expiry move is about to append
    it to the group's destination, another container's ack of it answers ``acked``: the
    move's append carries the settle of the lease as read, so it stores nothing."""
    for name in (SOURCE, DLQ):
        broker.admin.create_topic(name, queues=2)
    broker.retries.set_max_delivery_attempts(GROUP, 1)
    broker.retries.set_dead_letter_destination(GROUP, DLQ, {"from": SOURCE})
    send(broker, SOURCE, b"a")
    (leased,) = broker.consume.receive(GROUP, SOURCE, invisible_seconds=10)
    clock.advance(11)
    real = MoveAppender.append
    acks: list = []

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        if topic.name == DLQ and not acks:
            acks.append(other.consume.ack(GROUP, [leased.receipt_handle]))
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", append)
    assert broker.consume.receive(GROUP, SOURCE) == []
    monkeypatch.undo()
    assert [outcome.status.value for outcome in acks[0]] == ["acked"]
    assert drain(broker, clock, DLQ_GROUP, DLQ) == []
    assert drain(broker, clock, GROUP, SOURCE) == []


def test_a_move_task_moves_each_message_once_and_completes(broker, clock) -> None:
    dead_letters_in_destination(broker, clock, [b"a", b"b", b"c"])
    task = broker.move_tasks.run(start(broker, to_move=3))
    assert (task.status, task.moved, task.to_move) == (COMPLETED, 3, 3)
    assert drain(broker, clock, "reader", BACK) == [b"a", b"b", b"c"]
    assert all(
        "from" not in r.message.properties
        for r in broker.consume.receive("again", BACK, max_messages=10)
    )
    assert drain(broker, clock, DLQ_GROUP, DLQ) == []


def test_a_cancel_of_a_finished_task_is_not_found_and_leaves_it_completed(broker, clock) -> None:
    dead_letters_in_destination(broker, clock, [b"a"])
    task = broker.move_tasks.run(start(broker))
    assert task.status == COMPLETED
    with pytest.raises(MoveTaskNotFound):
        broker.move_tasks.cancel(MoveTaskId(task.group, task.stream))
    (listed,) = broker.move_tasks.recent(DLQ_GROUP)
    assert (listed.status, listed.moved, listed.version) == (COMPLETED, 1, task.version)


def test_a_cancel_landing_before_the_tasks_last_finish_ends_it_cancelled(
    broker, other, clock, monkeypatch
) -> None:
    """A cancel that answers between the runner's last (empty) step and its COMPLETED
    finish wins: the finish, written on the task as read, is refused, and the task ends
    CANCELLED as the cancel said."""
    dead_letters_in_destination(broker, clock, [b"a"])
    store = broker.move_tasks._store  # noqa: SLF001
    real = store.finish
    cancelled: list = []

    def finish(task, status, *args, **kwargs):
        if status == COMPLETED and not cancelled:
            cancelled.append(other.move_tasks.cancel(MoveTaskId(task.group, task.stream)))
        return real(task, status, *args, **kwargs)

    monkeypatch.setattr(store, "finish", finish)
    task = broker.move_tasks.run(start(broker))
    assert cancelled and cancelled[0].status == "CANCELLING"
    assert (task.status, task.moved) == (CANCELLED, 1)
    assert drain(broker, clock, "reader", BACK) == [b"a"]


def test_a_delete_landing_before_the_tasks_append_is_not_moved(
    broker, other, clock, monkeypatch
) -> None:
    dead_letters_in_destination(broker, clock, [b"a", b"b"])
    real = MoveAppender.append
    deleted: list[bytes] = []

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith("~movetask") and not deleted:
            (task,) = other.move_tasks.recent(DLQ_GROUP)
            first = task.held[0]
            other.consume.ack(DLQ_GROUP, [first])  # a DeleteMessage through another container
            deleted.append(first)
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", append)
    task = broker.move_tasks.run(start(broker))
    monkeypatch.undo()
    assert task.status == COMPLETED
    moved = drain(broker, clock, "reader", BACK)
    assert len(moved) == task.moved == 1  # the deleted one stays deleted
    assert drain(broker, clock, DLQ_GROUP, DLQ) == []


def test_a_cancel_landing_before_the_tasks_append_moves_nothing(
    broker, other, clock, monkeypatch
) -> None:
    dead_letters_in_destination(broker, clock, [b"a", b"b"])
    real = MoveAppender.append
    cancelled: list = []

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith("~movetask") and not cancelled:
            (task,) = other.move_tasks.recent(DLQ_GROUP)
            cancelled.append(other.move_tasks.cancel(MoveTaskId(task.group, task.stream)))
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", append)
    task = broker.move_tasks.run(start(broker))
    monkeypatch.undo()
    assert (task.status, task.moved) == (CANCELLED, 0)
    assert drain(broker, clock, "reader", BACK) == []
    assert drain(broker, clock, DLQ_GROUP, DLQ) == [b"a", b"b"]  # back when the lease ends


@pytest.mark.parametrize("dies", ["before", "after"])
def test_a_runner_that_dies_is_taken_over_and_nothing_moves_twice(
    broker, other, clock, monkeypatch, dies
) -> None:
    dead_letters_in_destination(broker, clock, [b"a", b"b", b"c"])
    real = MoveAppender.append

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith("~movetask") and dies == "before":
            raise Crash()
        out = real(self, topic, queue, messages, stamp, *args, **kwargs)
        if stamp.producer_id.startswith("~movetask"):
            raise Crash()
        return out

    monkeypatch.setattr(MoveAppender, "append", append)
    task = start(broker)
    with pytest.raises(Crash):
        broker.move_tasks.run(task)
    monkeypatch.undo()
    with pytest.raises(MoveTaskRunning):  # its runner holds it for a while
        start(other)
    clock.advance(61)  # the hold passed (and the batch's lease ended)
    taken = start(other)
    assert taken.stream == task.stream  # the same task, taken over
    done = other.move_tasks.run(taken)
    assert (done.status, done.moved) == (COMPLETED, 3)
    assert drain(broker, clock, "reader", BACK) == [b"a", b"b", b"c"]
    assert drain(broker, clock, DLQ_GROUP, DLQ) == []


def test_a_running_task_refuses_a_second_and_lists_with_its_handle(broker, clock) -> None:
    dead_letters_in_destination(broker, clock, [b"a"])
    task = start(broker)
    with pytest.raises(MoveTaskRunning):
        start(broker)
    (listed,) = broker.move_tasks.recent(DLQ_GROUP, 10)
    assert (listed.stream, listed.status) == (task.stream, RUNNING)
    assert MoveTaskId.parse(MoveTaskId(task.group, task.stream).handle) == MoveTaskId(
        task.group, task.stream
    )


def test_a_task_moving_a_topic_into_itself_is_refused(broker, clock) -> None:
    dead_letters_in_destination(broker, clock, [b"a"])
    with pytest.raises(InvalidRequest):
        broker.move_tasks.start(DLQ_GROUP, DLQ, destination=DLQ)
    with pytest.raises(InvalidRequest):
        broker.move_tasks.start(DLQ_GROUP, DLQ, route_property="from", routes={SOURCE: DLQ})
    assert broker.move_tasks.recent(DLQ_GROUP, 10) == []


def test_a_task_left_running_goes_on_without_a_new_start(broker, other, clock) -> None:
    """SQS runs a move task to its end by itself: a task whose runner stopped (its time ran
    out, or it died) is taken over by the scheduled resume once its hold passed."""
    dead_letters_in_destination(broker, clock, [b"a", b"b", b"c"])
    task = start(broker)
    left = broker.move_tasks.run(task, seconds=0)  # its request's time ran out
    assert left.status == RUNNING
    assert other.move_tasks.resume_running() == []  # its runner still holds it
    clock.advance(61)
    (done,) = other.move_tasks.resume_running()
    assert (done.stream, done.status, done.moved) == (task.stream, COMPLETED, 3)
    assert drain(broker, clock, "reader", BACK) == [b"a", b"b", b"c"]
    assert other.move_tasks.resume_running() == []  # none running: nothing to do


def _items(params: dict) -> set[tuple[str, str, str]]:
    """The items (table, partition, sort key) a TransactWriteItems request touches."""
    touched = set()
    for entry in json.loads(params["body"])["TransactItems"]:
        ((_, op),) = entry.items()
        key = op.get("Key") or op["Item"]
        touched.add((op["TableName"], str(key["group_name"]), str(key["stream"])))
    return touched


@contextmanager
def overlapping(client, action: Callable[[], object]) -> Iterator[list[str]]:
    """The next TransactWriteItems of ``client`` is in flight while ``action`` runs: a
    transaction of ``action`` touching one of its items is cancelled (TransactionConflict),
    as DynamoDB cancels it; yields what each of ``action``'s transactions met."""
    held: list[set] = []
    met: list[str] = []

    def hold(params, **_):
        if held:
            conflict = bool(_items(params) & held[0])
            met.append("conflict" if conflict else "free")
            return cancellation("TransactionConflict") if conflict else None
        held.append(_items(params))
        action()
        return None

    event = "before-call.dynamodb.TransactWriteItems"
    client.meta.events.register(event, hold)
    try:
        yield met
    finally:
        client.meta.events.unregister(event, hold)


def _two_sources(broker) -> None:
    for name in (DLQ, BACK, "dead2"):
        broker.admin.create_topic(name, queues=2)


def test_tasks_of_different_sources_start_at_once_without_contention(broker, other) -> None:
    _two_sources(broker)
    started: list[MoveTask] = []
    second = lambda: started.append(other.move_tasks.start("g2", "dead2", destination=BACK))  # noqa: E731
    with overlapping(broker._dynamodb, second) as met:
        first = broker.move_tasks.start(DLQ_GROUP, DLQ, destination=BACK)
    assert met == ["free"]
    assert [t.status for t in (first, *started)] == [RUNNING, RUNNING]
    assert other.move_tasks.recent("g2", 10) == started


def test_a_task_finishing_while_another_source_starts_one_meets_no_contention(
    broker, other, clock
) -> None:
    _two_sources(broker)
    task = broker.move_tasks.start(DLQ_GROUP, DLQ, destination=BACK)
    started: list[MoveTask] = []
    second = lambda: started.append(other.move_tasks.start("g2", "dead2", destination=BACK))  # noqa: E731
    with overlapping(broker._dynamodb, second) as met:
        done = broker.move_tasks.run(task)  # nothing to move: it completes
    assert met == ["free"]
    assert done.status == COMPLETED and [t.status for t in started] == [RUNNING]
    clock.advance(61)
    (resumed,) = broker.move_tasks.resume_running()  # the registry knows the running one
    assert (resumed.group, resumed.status) == ("g2", COMPLETED)


def _as_an_earlier_release_stored_it(broker, task: MoveTask) -> None:
    """Its lock in its group's partition, its group in the registry item's set."""
    client, table = broker._dynamodb, broker.settings.groups_table
    client.delete_item(
        TableName=table, Key={"group_name": {"S": "#move-tasks"}, "stream": {"S": task.group}}
    )
    client.put_item(
        TableName=table,
        Item={
            "group_name": {"S": task.group},
            "stream": {"S": "#task"},
            "running": {"S": task.stream},
        },
    )
    client.update_item(
        TableName=table,
        Key={"group_name": {"S": "#move-tasks"}, "stream": {"S": "#running"}},
        UpdateExpression="ADD #g :g",
        ExpressionAttributeNames={"#g": "groups"},
        ExpressionAttributeValues={":g": {"SS": [task.group]}},
    )
    client.update_item(
        TableName=table,
        Key={"group_name": {"S": task.group}, "stream": {"S": task.stream}},
        UpdateExpression="REMOVE locked_in_registry",
    )


def test_a_task_an_earlier_release_started_holds_its_group_and_goes_on(broker, other, clock):
    dead_letters_in_destination(broker, clock, [b"a", b"b"])
    task = start(broker)
    _as_an_earlier_release_stored_it(broker, task)
    with pytest.raises(MoveTaskRunning):
        start(other)
    clock.advance(61)
    (done,) = other.move_tasks.resume_running()
    assert (done.stream, done.status, done.moved) == (task.stream, COMPLETED, 2)
    assert drain(broker, clock, "reader", BACK) == [b"a", b"b"]
    assert other.move_tasks.resume_running() == []  # its lock and registry entry are gone
    assert start(other).status == RUNNING


def test_a_finish_clears_the_lock_only_while_it_names_the_finishing_task(broker, clock) -> None:
    """The lock item and the task item change together (start and finish are one
    transaction each), so no writer leaves a running task whose lock names another; the
    finish's condition on the lock is a second line behind that. Shown on a lock set by
    hand to name another task: the finish refuses and leaves it."""
    dead_letters_in_destination(broker, clock, [b"a"])
    task = start(broker)
    store = broker.move_tasks._store
    lock_key = {"group_name": REGISTRY_GROUP, "stream": DLQ_GROUP}
    lock = to_item({**lock_key, "running": "#task#other"})
    store._client.put_item(TableName=store._table, Item=lock)
    assert not store.finish(task, COMPLETED, clock.now // 1000)
    assert store.running(DLQ_GROUP) is None  # the lock still names the other task
    item = store._client.get_item(TableName=store._table, Key=to_item(lock_key))["Item"]
    assert item["running"] == {"S": "#task#other"}
    assert store.get(task.group, task.stream).status == RUNNING
