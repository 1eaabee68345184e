"""Retries with backoff and dead letters, on in-process moto with a fake clock."""

from __future__ import annotations

import boto3
import pytest
from broker_helpers import Crash, ack_statuses, send, statuses, stream_count
from cirrusmq_broker.errors import InvalidDuration, InvalidRequest
from cirrusmq_broker.model import MessageInput, MessageType
from cirrusmq_broker.rules.retries import BACKOFF_SECONDS, level_for_delay
from cirrusmq_broker.services import optimistic
from cirrusmq_broker.services import retries as retries_module
from cirrusmq_broker.services.delivery import receive as receive_module
from cirrusmq_broker.storage.groups import GroupStateStore


def fail_once(broker, clock, group="g", topic="t", wait: float = 0):
    """Receive (after ``wait`` s) and let the lease expire; returns what was received."""
    clock.advance(wait)
    got = broker.consume.receive(group, topic, invisible_seconds=10, max_messages=100)
    clock.advance(10)
    assert broker.consume.receive(group, topic) == []  # a poll at expiry moves it on
    return got


def test_backoff_levels_never_early():
    assert [level_for_delay(s) for s in (0, 10, 11, 60, 61, 7200)] == [0, 0, 1, 2, 3, 15]
    with pytest.raises(ValueError):
        level_for_delay(7201)


def test_an_expired_message_comes_back_on_the_backoff_schedule(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.retries.set_max_delivery_attempts("g", 6)
    [first] = fail_once(broker, clock)
    assert first.delivery_attempt == 1
    for attempt, delay in zip(range(2, 6), BACKOFF_SECONDS, strict=False):
        clock.advance(delay - 1)
        assert broker.consume.receive("g", "t") == [], f"attempt {attempt} early"
        clock.advance(1)
        [m] = broker.consume.receive("g", "t", invisible_seconds=10)
        assert (m.delivery_attempt, m.message.topic, m.message.offset) == (attempt, "t", 0)
        assert m.message.message_id == first.message.message_id
        clock.advance(10)
        assert broker.consume.receive("g", "t") == []  # a poll at expiry moves it on
    [status] = [s for s in statuses(broker, "g") if s.topic == "t"]
    assert (status.committed_offset, status.inflight) == (1, 0)  # no head-of-line blocking


def test_after_the_last_attempt_the_message_is_a_dead_letter(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"poison")
    broker.retries.set_max_delivery_attempts("g", 3)
    fail_once(broker, clock)  # 1
    fail_once(broker, clock, wait=10)  # 2
    fail_once(broker, clock, wait=30)  # 3: the last one
    clock.advance(3600)
    assert broker.consume.receive("g", "t") == []
    page = broker.dead_letters.list("g")
    [dead] = page.dead_letters
    system = dead.message.system
    assert (dead.message.body, system.origin_topic, system.origin_queue, system.origin_offset) == (
        b"poison",
        "t",
        0,
        0,
    )
    assert system.reconsume_count == 3 and "expired" in system.dead_letter_reason
    # redrive: back to the group, same id, attempts start again
    result = broker.dead_letters.redrive("g")
    assert (result.redriven, result.done) == (1, True)
    assert broker.dead_letters.redrive("g").redriven == 0  # resumable: nothing twice
    [again] = broker.consume.receive("g", "t")
    assert (again.message.body, again.message.message_id, again.delivery_attempt) == (
        b"poison",
        dead.message.message_id,
        1,
    )
    assert again.message.offset == 0  # shown at its first place; the topic holds it once
    assert stream_count(broker, "t#") == 1
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]
    assert broker.dead_letters.purge("g") == 1
    assert broker.dead_letters.list("g").dead_letters == []


def test_nack_goes_to_the_next_level_or_the_requested_delay(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", max_messages=2)
    results = broker.retries.nack("g", [a.receipt_handle])
    assert [o.status for o in results] == ["acked"]
    assert [o.status for o in broker.retries.nack("g", [b.receipt_handle], 45)] == ["acked"]
    clock.advance(10)
    [m] = broker.consume.receive("g", "t")
    assert (m.message.body, m.delivery_attempt) == (b"a", 2)
    clock.advance(49)  # b asked for 45 s: the 60 s level (never early)
    assert broker.consume.receive("g", "t") == []
    clock.advance(1)
    [m] = broker.consume.receive("g", "t")
    assert m.message.body == b"b"
    # the stale handle and forged ones are told apart
    forged = a.receipt_handle[:-3] + ("AAA" if a.receipt_handle[-3:] != "AAA" else "BBB")
    outcome = broker.retries.nack("g", [a.receipt_handle, forged])
    assert [o.status for o in outcome] == ["expired", "invalid"]
    with pytest.raises(InvalidDuration):
        broker.retries.nack("g", [m.receipt_handle], 7201)


def test_a_resent_nack_stores_nothing_twice(broker, clock, monkeypatch):
    from cirrusmq_broker.services.moves import MoveAppender

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    [a] = broker.consume.receive("g", "t")
    real = MoveAppender.append

    def lost_answer(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise Crash()

    with monkeypatch.context() as patch:  # the append and its settle commit; the answer is lost
        patch.setattr(MoveAppender, "append", lost_answer)
        with pytest.raises(Crash):
            broker.retries.nack("g", [a.receipt_handle])
    # the lease is gone with the settle: the resend finds nothing to give back
    assert [o.status for o in broker.retries.nack("g", [a.receipt_handle])] == ["expired"]
    assert retry_messages(broker) == 1
    clock.advance(10)
    assert len(broker.consume.receive("g", "t", max_messages=10)) == 1


def test_fifo_topics_redeliver_in_place_then_dead_letter(broker, clock):
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"1", message_group="k")])
    broker.retries.set_max_delivery_attempts("g", 2)
    [m] = broker.consume.receive("g", "f", invisible_seconds=10)
    clock.advance(10)
    [m2] = broker.consume.receive("g", "f", invisible_seconds=10)  # in place, at once
    assert (m2.delivery_attempt, m2.message.offset) == (2, m.message.offset)
    clock.advance(10)
    assert broker.consume.receive("g", "f") == []
    [dead] = broker.dead_letters.list("g").dead_letters
    assert dead.message.system.origin_topic == "f"
    [status] = statuses(broker, "g")
    assert status.committed_offset == 1


def test_max_delivery_attempts_bounds(broker):
    for bad in (0, 1001, True, "3"):
        with pytest.raises(InvalidRequest):
            broker.retries.set_max_delivery_attempts("g", bad)
    assert broker.retries.max_delivery_attempts("g") == 16
    broker.retries.set_max_delivery_attempts("g", 1000)
    assert broker.retries.max_delivery_attempts("g", fresh=True) == 1000


def test_retry_topics_are_hidden_from_listings(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    fail_once(broker, clock)
    broker.consume.receive("g", "t")  # the expiry moves it: the retry topic now exists
    assert [t.name for t in broker.admin.list_topics()] == ["t"]
    assert broker.moves.existing("retry.g.t") is not None


def aws_calls(fn) -> list[str]:
    from cirrusmq_broker.storage.clients import observe_calls

    calls: list[str] = []
    remove = observe_calls(lambda service, operation, _: calls.append(operation))
    try:
        fn()
    finally:
        remove()
    return calls


def test_idle_polls_read_the_retry_topic_at_most_every_few_seconds(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t")
    clock.advance(6)
    no_retry_topic = aws_calls(lambda: broker.consume.receive("g", "t"))
    idle_before = aws_calls(lambda: broker.consume.receive("g", "t"))
    broker.retries.nack("g", [m.receipt_handle])
    clock.advance(10)
    [m] = broker.consume.receive("g", "t")
    ack_statuses(broker, "g", [m.receipt_handle])
    clock.advance(10)
    with_retry_topic = aws_calls(lambda: broker.consume.receive("g", "t"))
    idle_after = aws_calls(lambda: broker.consume.receive("g", "t"))
    print(f"\nidle poll: {idle_before}; every 5 s without a retry topic: {no_retry_topic}")
    print(f"idle poll: {idle_after}; every 5 s with a retry topic: {with_retry_topic}")
    assert idle_before == ["BatchGetItem"] and idle_after == ["BatchGetItem"]
    # the topics table is asked whether the retry topic exists at most every 30 s
    assert sorted(no_retry_topic) in (["BatchGetItem"], ["BatchGetItem", "GetItem"])
    assert sorted(with_retry_topic) == ["BatchGetItem", "BatchGetItem"]


def test_a_nack_costs_one_put_and_one_transaction_plus_the_lease_reads(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.retries.nack("g", [broker.consume.receive("g", "t")[0].receipt_handle])  # warm
    send(broker, "t", b"y")
    clock.advance(30)
    got = [m for m in broker.consume.receive("g", "t", max_messages=10) if m.message.body == b"y"]
    calls = aws_calls(lambda: broker.retries.nack("g", [got[0].receipt_handle]))
    print(f"one retry publish by nack: {sorted(calls)}")
    assert calls.count("PutObject") == 1 and calls.count("TransactWriteItems") == 1


def _crash(*args, **kwargs):
    raise Crash()


def retry_messages(broker) -> int:

    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.log_index_table)["Items"]
    return sum(int(i["count"]["N"]) for i in items if i["stream"]["S"].startswith("retry."))


def test_a_fifo_nack_redelivers_in_place_after_the_delay(broker, clock):
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"1", message_group="k")])
    [m] = broker.consume.receive("g", "f", invisible_seconds=60)
    assert [o.status for o in broker.retries.nack("g", [m.receipt_handle], 20)] == ["acked"]
    clock.advance(19)
    assert broker.consume.receive("g", "f") == []
    clock.advance(1)
    [again] = broker.consume.receive("g", "f")
    assert (again.message.offset, again.delivery_attempt) == (m.message.offset, 2)


def test_redrive_by_topic_and_by_message_id(broker, clock):
    for name in ("a", "b"):
        broker.admin.create_topic(name, queues=1)
        send(broker, name, b"1-" + name.encode(), b"2-" + name.encode())
    broker.retries.set_max_delivery_attempts("g", 1)
    for name in ("a", "b"):
        got = broker.consume.receive("g", name, max_messages=10)
        broker.retries.nack("g", [m.receipt_handle for m in got])
    assert len(broker.dead_letters.list("g").dead_letters) == 4
    assert len(broker.dead_letters.list("g", topic="a").dead_letters) == 2
    page = broker.dead_letters.list("g", limit=3)
    assert len(page.dead_letters) == 3 and page.next_start == 3
    one = next(d for d in page.dead_letters if d.message.body == b"1-b")
    result = broker.dead_letters.redrive("g", message_ids=[one.message.message_id])
    assert result.redriven == 1
    assert broker.dead_letters.redrive("g", message_ids=[one.message.message_id]).redriven == 0
    assert broker.dead_letters.redrive("g", topic="a").redriven == 2
    assert [m.message.body for m in broker.consume.receive("g", "b")] == [b"1-b"]
    assert sorted(m.message.body for m in broker.consume.receive("g", "a", max_messages=9)) == [
        b"1-a",
        b"2-a",
    ]
    with pytest.raises(InvalidRequest):
        broker.dead_letters.redrive("g", max_messages=0)


def test_a_lease_over_many_small_batches_moves_every_message(broker, clock):
    """Leases over a full index page of batches (100 each here): every message moves."""
    broker.admin.create_topic("t", queues=1)
    for i in range(105):
        send(broker, "t", b"%d" % i)
    got = broker.consume.receive("g", "t", max_messages=200, invisible_seconds=10)
    got += broker.consume.receive("g", "t", max_messages=200, invisible_seconds=10)
    assert len(got) == 105
    clock.advance(10)
    assert broker.consume.receive("g", "t") == []  # moved to the retry topic
    clock.advance(10)
    again = broker.consume.receive("g", "t", max_messages=200)
    assert sorted(int(m.message.body) for m in again) == list(range(105))


def test_a_contended_expiry_skips_the_queue_instead_of_redelivering_in_place(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    real = GroupStateStore.save
    losses = {"n": 0}

    def save(self, state, *more):
        if losses["n"] < optimistic.SAVE_ATTEMPTS:
            losses["n"] += 1
            return False  # another consumer's write won the race each time
        return real(self, state, *more)

    monkeypatch.setattr(GroupStateStore, "save", save)
    assert broker.consume.receive("g", "t", invisible_seconds=10) == []
    monkeypatch.setattr(GroupStateStore, "save", real)
    clock.advance(10)
    broker.consume.receive("g", "t")  # the next pass moves it, under the same stamp
    assert stream_count(broker, "retry.") == 1


def test_more_expired_leases_than_one_pass_moves_all_wait_for_backoff(broker, clock, monkeypatch):
    # the pass's time bound (tested on its own) must not cut it short on a loaded machine
    monkeypatch.setattr(receive_module, "MIN_PASS_SECONDS", 300.0)
    broker.admin.create_topic("t", queues=1)
    for i in range(retries_module.MAX_MOVES_PER_PASS + 5):
        send(broker, "t", b"%d" % i)
    for _ in range(retries_module.MAX_MOVES_PER_PASS + 5):
        broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    clock.advance(10)
    got = broker.consume.receive("g", "t", max_messages=32)
    assert got == []  # none in place (no backoff skipped)
    assert stream_count(broker, "retry.") == retries_module.MAX_MOVES_PER_PASS
    broker.consume.receive("g", "t", max_messages=32)
    assert stream_count(broker, "retry.") == retries_module.MAX_MOVES_PER_PASS + 5


def test_change_invisible_of_a_retry_delivery(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    broker.retries.nack("g", [m.receipt_handle])
    clock.advance(10)
    [again] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert again.delivery_attempt == 2
    changed = broker.consume.change_invisible("g", again.receipt_handle, 60)
    assert changed.message.topic == "t"
    assert changed.message.message_id == m.message.message_id
    assert changed.delivery_attempt == 2
    clock.advance(30)
    assert broker.consume.receive("g", "t") == []  # still invisible
    acked = broker.consume.ack("g", [changed.receipt_handle])
    assert [o.status.value for o in acked] == ["acked"]


def test_a_nack_of_many_leases_of_one_queue_is_one_append(broker, clock):
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", *[b"%d" % i for i in range(10)])
    singles = [
        broker.consume.receive("g", "t", max_messages=1, invisible_seconds=60)[0] for _ in range(10)
    ]
    puts: list[str] = []
    remove = observe_calls(lambda service, op, _: puts.append(op) if op == "PutObject" else None)
    try:
        out = broker.retries.nack("g", [m.receipt_handle for m in singles])
    finally:
        remove()
    assert [o.status for o in out] == ["acked"] * 10
    assert puts == ["PutObject"]
    assert stream_count(broker, "retry.") == 10
    again = broker.retries.nack("g", [m.receipt_handle for m in singles])  # a resend
    assert [o.status for o in again] == ["expired"] * 10
    assert stream_count(broker, "retry.") == 10
    clock.advance(10)
    got = broker.consume.receive("g", "t", max_messages=32)
    assert sorted(r.message.offset for r in got) == list(range(10))
    assert {r.delivery_attempt for r in got} == {2}
