"""Transactions on in-process moto: half sends, commit / rollback, checks, fencing, crashes."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter

import boto3
import pytest
from broker_helpers import DynamoAnswer, object_keys
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import (
    AccessDenied,
    BrokerError,
    Conflict,
    DelayNotAllowed,
    IdempotencyConflict,
    InvalidMessage,
    InvalidRequest,
    NotTransactional,
    ProducerFenced,
    ProducerNotRegistered,
    TooManyQueues,
    TopicNotFound,
    TransactionAlreadyEnded,
    TransactionNotFound,
    TransactionRequired,
    TransactionTooLarge,
    TransactionTopicMismatch,
)
from cirrusmq_broker.model import MessageInput, ProducerStamp
from cirrusmq_broker.rules.transaction_state import (
    CheckTimings,
    Resolution,
    TxnState,
    commit_stamp_id,
    committed_name,
)
from cirrusmq_broker.storage.batch_objects import object_key
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.producers import ProducerRecord

PG = "orders-pg"


class SimulatedCrash(BaseException):
    """The Lambda dies at this point."""


@pytest.fixture
def txn_broker(settings, clock) -> Broker:
    table = "TransactionsTable"
    names = _table_name(table)
    broker = Broker(dataclasses.replace(settings, transactions_table=names), clock)
    broker.admin.create_topic("pay", queues=2, message_type="TRANSACTION")
    broker.admin.create_topic("plain", queues=1)
    return broker


def _table_name(logical: str) -> str:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    return next(t for t in ddb.list_tables()["TableNames"] if logical in t)


@pytest.fixture
def calls():
    seen: list[str] = []
    remove = observe_calls(lambda service, op, _params: seen.append(f"{service}.{op}"))
    yield seen
    remove()


def half(broker, txid, *bodies, part=0, epoch=1, tid="p1", topic="pay", timings=None, **fields):
    return broker.transactions.send(
        PG,
        txid,
        transactional_id=tid,
        epoch=epoch,
        topic_name=topic,
        inputs=[MessageInput(b, **fields) for b in bodies],
        part=part,
        timings=timings,
    )


def visible(broker, topic="pay", group="g") -> list[bytes]:
    got = []
    while batch := broker.consume.receive(group, topic, max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack(group, [m.receipt_handle for m in batch])
    return sorted(got)


def topic_objects(broker) -> list[str]:
    return [k for k in object_keys(broker) if k.startswith("topics/")]


def half_objects(broker) -> list[str]:
    return [k for k in object_keys(broker) if k.startswith("half/")]


def test_half_messages_are_invisible_until_commit_then_visible_once(txn_broker, calls):
    b = txn_broker
    assert b.transactions.register(PG, "p1") == 1
    calls.clear()
    sent = half(b, "tx1", b"a", b"b")
    send_calls = list(calls)
    assert [r.message_id for r in sent.receipts] and not sent.duplicate
    assert half_objects(b) and not topic_objects(b)
    assert visible(b) == []
    calls.clear()
    result = b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    commit_calls = list(calls)
    assert result.state is TxnState.COMMITTED and result.changed
    assert visible(b) == [b"a", b"b"]
    assert half_objects(b) == []
    again = b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert not again.changed and visible(b, group="g2") == [b"a", b"b"]  # once, not twice
    with pytest.raises(TransactionAlreadyEnded):
        b.transactions.end(PG, "tx1", Resolution.ROLLBACK, producer=("p1", 1))
    # the AWS calls of one transaction (one send of one queue + commit), for the report
    print("send:", Counter(send_calls), "commit:", Counter(commit_calls))
    assert len(send_calls) <= 3 and len(commit_calls) <= 10  # 2 reads only while cold; the
    # commit object is a conditional put of the half's content (GET + PUT If-None-Match);
    # the append is three plain writes (claim, index item, head): 3 write units, not 6


def test_rollback_is_never_visible_nor_in_topics(txn_broker):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"secret")
    result = b.transactions.end(PG, "tx1", Resolution.ROLLBACK, producer=("p1", 1))
    assert result.state is TxnState.ROLLED_BACK
    assert visible(b) == [] and topic_objects(b) == [] and half_objects(b) == []
    assert b.transactions.end(PG, "tx1", Resolution.ROLLBACK).changed is False
    with pytest.raises(TransactionAlreadyEnded) as info:
        b.transactions.end(PG, "tx1", Resolution.COMMIT)
    assert info.value.code == "TransactionAlreadyEnded" and info.value.http_status == 409


def test_several_sends_commit_together_and_merge_per_queue(txn_broker):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"one", b"two", part=0)
    half(b, "tx1", b"three", part=1)
    half(b, "tx1", b"grouped", part=2, message_group="order-7")
    assert visible(b) == []
    b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert visible(b) == [b"grouped", b"one", b"three", b"two"]
    half(b, "tx2", b"x", part=0)
    half(b, "tx2", b"y", part=1)
    b.transactions.end(PG, "tx2", Resolution.ROLLBACK, producer=("p1", 1))
    assert visible(b, group="g3") == [b"grouped", b"one", b"three", b"two"]


def test_a_retried_send_stores_nothing_twice(txn_broker):
    b = txn_broker
    b.transactions.register(PG, "p1")
    first = half(b, "tx1", b"a", message_id="m1")
    again = half(b, "tx1", b"a", message_id="m1")
    assert again.duplicate and again.receipts == first.receipts
    with pytest.raises(IdempotencyConflict):
        half(b, "tx1", b"other", message_id="m2")
    assert len(half_objects(b)) == 1
    b.transactions.end(PG, "tx1", Resolution.COMMIT)
    assert visible(b) == [b"a"]


def test_fencing_refuses_the_older_instance(txn_broker):
    b = txn_broker
    assert b.transactions.register(PG, "p1") == 1
    half(b, "tx1", b"zombie's")
    assert b.transactions.register(PG, "p1") == 2
    with pytest.raises(ProducerFenced) as info:
        b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert info.value.http_status == 409 and info.value.details["current_epoch"] == 2
    with pytest.raises(ProducerFenced):
        half(b, "tx2", b"zombie again", epoch=1)
    with pytest.raises(ProducerFenced):
        b.transactions.poll_checks(PG, "p1", 1)
    with pytest.raises(ProducerNotRegistered):
        half(b, "tx3", b"never registered", tid="nobody")
    assert b.transactions.describe(PG, "tx1").state is TxnState.OPEN
    assert visible(b) == [] and len(half_objects(b)) == 1  # the refused sends left nothing


def test_bad_input_is_refused_and_stores_nothing(txn_broker):
    b = txn_broker
    b.transactions.register(PG, "p1")
    with pytest.raises(TransactionRequired):
        b.produce.send("pay", [MessageInput(b"plain send")])
    with pytest.raises(NotTransactional):
        half(b, "tx1", b"x", topic="plain")
    with pytest.raises(TopicNotFound):
        half(b, "tx1", b"x", topic="nope")
    with pytest.raises(InvalidMessage):
        half(b, "tx1", b"")
    with pytest.raises(DelayNotAllowed):  # a delay would be dropped silently otherwise
        half(b, "tx1", b"x", delay_level=3)
    with pytest.raises(InvalidRequest):
        half(b, "bad/id", b"x")
    with pytest.raises(InvalidRequest):
        half(b, "tx1", b"x", part=999)
    with pytest.raises(InvalidRequest):
        half(b, "tx1", b"x", timings=CheckTimings(max_checks=0))
    with pytest.raises(TransactionNotFound):
        b.transactions.end(PG, "nope", Resolution.COMMIT)
    assert object_keys(b) == []
    b.admin.create_topic("pay2", message_type="TRANSACTION")
    half(b, "tx1", b"x")
    with pytest.raises(TransactionTopicMismatch):
        half(b, "tx1", b"y", topic="pay2", part=1)
    assert len(half_objects(b)) == 1
    for err in (TransactionRequired, NotTransactional, TransactionTopicMismatch):
        assert 400 <= err.http_status < 500 and issubclass(err, BrokerError)


def test_checks_ask_the_group_then_a_commit_answer_ends_it(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"paid", timings=CheckTimings(6, 30, 15), tag="T")
    assert b.transactions.run_checks().asked == 0  # immune for 6 s
    clock.advance(7)
    assert b.transactions.run_checks().asked == 1
    assert b.transactions.run_checks().asked == 0  # next one in 30 s
    b.transactions.register(PG, "p2")
    checks = b.transactions.poll_checks(PG, "p2", 1)
    assert [(c.transaction_id, c.message.body, c.message.tag) for c in checks] == [
        ("tx1", b"paid", "T")
    ]
    assert b.transactions.poll_checks(PG, "p2", 1) == []  # claimed: not handed out twice
    b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p2", 1), by="check")
    assert visible(b) == [b"paid"]
    assert b.transactions.list_open(PG) == []
    clock.advance(60)
    assert b.transactions.poll_checks(PG, "p2", 1) == []


def test_unknown_max_times_rolls_back_with_the_reason(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"undecided", timings=CheckTimings(1, 2, 15))
    for number in range(15):
        clock.advance(2)
        assert b.transactions.run_checks().asked == 1, number
        [check] = b.transactions.poll_checks(PG, "p1", 1)
        assert check.check_number == number + 1
        b.transactions.end(PG, "tx1", Resolution.UNKNOWN, producer=("p1", 1), by="check")
        [listed] = b.transactions.list_open(PG)
        assert listed.checks == number + 1
    clock.advance(2)
    assert b.transactions.run_checks().rolled_back == 1
    txn = b.transactions.describe(PG, "tx1")
    assert txn.state is TxnState.ROLLED_BACK and txn.end_reason == "no verdict after 15 checks"
    assert visible(b) == [] and half_objects(b) == [] and b.transactions.list_open(PG) == []


def test_retention_rolls_an_undecided_one_back_with_the_reason(txn_broker, clock):
    b = txn_broker
    b.admin.create_topic("short", queues=1, message_type="TRANSACTION", retention_hours=1)
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"old", topic="short", timings=CheckTimings(3600, 3600, 100))
    clock.advance(3601)
    report = b.transactions.run_checks()
    assert report.rolled_back == 1
    assert "retention" in (b.transactions.describe(PG, "tx1").end_reason or "")


def test_the_orphan_sweep_leaves_half_objects_alone(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"pending")
    before = half_objects(b)
    clock.advance(24 * 3600)
    b.janitor.sweep_orphans()
    assert half_objects(b) == before
    b.transactions.end(PG, "tx1", Resolution.COMMIT)
    assert visible(b) == [b"pending"]


@pytest.mark.parametrize("multi", [False, True], ids=["copy", "merge"])
def test_crash_matrix_of_commit(txn_broker, multi):
    """Fail each AWS call of a commit in turn, then commit again: visible exactly once."""
    b = txn_broker
    b.transactions.register(PG, "p1")
    txids = []
    step = 0
    while True:
        txid = f"tx{step}"
        half(b, txid, f"m{step}".encode(), part=0)
        if multi:
            half(b, txid, f"n{step}".encode(), part=1)
        count = Counter()

        def crash_at(_service, _op, _params, step=step, count=count):
            count["n"] += 1
            if count["n"] == step + 1:
                raise SimulatedCrash()

        remove = observe_calls(crash_at)
        try:
            b.transactions.end(PG, txid, Resolution.COMMIT, producer=("p1", 1))
            finished = True
        except SimulatedCrash:
            finished = False
        finally:
            remove()
        txids.append(txid)
        if finished:
            break
        b.transactions.end(PG, txid, Resolution.COMMIT, producer=("p1", 1))  # the re-run
        step += 1
    assert step >= 5
    expected = sorted(
        [f"m{i}".encode() for i in range(step + 1)]
        + ([f"n{i}".encode() for i in range(step + 1)] if multi else [])
    )
    assert visible(b) == expected
    assert half_objects(b) == []


def test_the_checker_finishes_a_commit_that_crashed(txn_broker, clock, monkeypatch):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"half way")
    from cirrusmq_broker.storage.appends import BatchAppender

    real = BatchAppender.append

    def append_then_die(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise SimulatedCrash()

    monkeypatch.setattr(BatchAppender, "append", append_then_die)
    with pytest.raises(SimulatedCrash):
        b.transactions.end(PG, "tx1", Resolution.COMMIT)
    monkeypatch.undo()
    with pytest.raises(TransactionAlreadyEnded):  # committing: no rollback any more
        b.transactions.end(PG, "tx1", Resolution.ROLLBACK)
    clock.advance(61)
    assert b.transactions.run_checks().committed == 1
    assert b.transactions.describe(PG, "tx1").state is TxnState.COMMITTED
    assert visible(b) == [b"half way"]


def test_a_deleted_topic_rolls_its_transactions_back(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"orphaned")
    b.admin.delete_topic("pay")
    b.catalog.forget("pay")
    with pytest.raises(TopicNotFound):
        b.transactions.end(PG, "tx1", Resolution.COMMIT)
    txn = b.transactions.describe(PG, "tx1")
    assert txn.state is TxnState.ROLLED_BACK and "deleted" in (txn.end_reason or "")


def test_a_check_answered_rollback_discards_and_records_who(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"not paid", timings=CheckTimings(0, 5, 3))
    assert b.transactions.run_checks().asked == 1
    [check] = b.transactions.poll_checks(PG, "p1", 1)
    assert check.message.offset == -1 and check.message_count == 1
    result = b.transactions.end(PG, "tx1", Resolution.ROLLBACK, producer=("p1", 1), by="check")
    assert result.state is TxnState.ROLLED_BACK
    txn = b.transactions.describe(PG, "tx1")
    assert (txn.ended_by, txn.end_reason) == ("check", "rolled back by a check's answer")
    assert visible(b) == [] and half_objects(b) == []
    clock.advance(60)
    assert b.transactions.run_checks().asked == 0  # ended: out of the due index
    assert b.transactions.poll_checks(PG, "p1", 1) == []


def test_check_rules_are_pure():
    from cirrusmq_broker.rules.transaction_state import CheckAction, Transaction, check_step

    txn = Transaction(
        PG,
        "t",
        "p",
        1,
        "pay",
        TxnState.OPEN,
        0,
        CheckTimings(6, 30, 2),
        checks=0,
        next_check_at=6000,
    )
    assert check_step(txn, 5999, 72).action is CheckAction.NONE
    assert check_step(txn, 6000, 72).action is CheckAction.ASK
    assert check_step(txn, 6000, None).action is CheckAction.ROLLBACK
    spent = dataclasses.replace(txn, checks=2)
    assert check_step(spent, 6000, 72).reason == "no verdict after 2 checks"
    assert check_step(txn, 3600 * 1000, 1).action is CheckAction.ROLLBACK
    committing = dataclasses.replace(txn, state=TxnState.COMMITTING)
    assert check_step(committing, 0, 72).action is CheckAction.RESUME_COMMIT


def _crashing_at(step: int):
    """An observer that kills the Lambda before its ``step``-th AWS call (0-based)."""
    count = Counter()

    def observer(_service, _op, _params):
        count["n"] += 1
        if count["n"] == step + 1:
            raise SimulatedCrash()

    return observer


def test_crash_matrix_of_half_sends_and_rollback(txn_broker):
    """A send that dies at any call, retried, stores its part once; a rollback that dies at
    any call, run again, discards everything."""
    b = txn_broker
    b.transactions.register(PG, "p1")

    crashed = 0
    step = 0
    while True:
        remove = observe_calls(_crashing_at(step))
        try:
            half(b, f"s{step}", f"paid{step}".encode(), message_id=f"m{step}")
            remove()
            break
        except SimulatedCrash:
            remove()
            half(b, f"s{step}", f"paid{step}".encode(), message_id=f"m{step}")  # the retry
            crashed += 1
        step += 1
    assert crashed >= 2
    for i in range(step + 1):
        b.transactions.end(PG, f"s{i}", Resolution.COMMIT)
    assert visible(b) == sorted(f"paid{i}".encode() for i in range(step + 1))

    steps = 0
    while True:
        txid = f"r{steps}"
        half(b, txid, b"never")
        remove = observe_calls(_crashing_at(steps))
        try:
            b.transactions.end(PG, txid, Resolution.ROLLBACK, producer=("p1", 1))
            remove()
            break
        except SimulatedCrash:
            remove()
            b.transactions.end(PG, txid, Resolution.ROLLBACK, producer=("p1", 1))  # re-run
        assert b.transactions.describe(PG, txid).state is TxnState.ROLLED_BACK
        steps += 1
    assert steps >= 2
    assert visible(b, group="g2") == sorted(f"paid{i}".encode() for i in range(step + 1))
    assert half_objects(b) == [] and b.transactions.list_open(PG) == []


def test_a_live_producer_keeps_its_registration(txn_broker, clock):
    b = txn_broker
    b.transactions.register(PG, "p1")
    store = b.transactions._store
    _, first = store.registration(PG, "p1")
    assert first == clock.now // 1000 + 30 * 24 * 3600  # expires unless the producer polls
    clock.advance(3600)
    b.transactions.poll_checks(PG, "p1", 1)
    assert store.registration(PG, "p1")[1] == first  # refreshed at most once a day
    clock.advance(2 * 24 * 3600)
    b.transactions.poll_checks(PG, "p1", 1)
    assert store.registration(PG, "p1")[1] == clock.now // 1000 + 30 * 24 * 3600


def _landing_before(monkeypatch, to: TxnState, action) -> list:
    """Run ``action`` once, just before the first transaction move to ``to`` is written (a
    concurrent request landing between the mover's read and its write); returns its result
    (or the error it raised) in a list."""
    from cirrusmq_broker.storage.transactions import TransactionStore

    real = TransactionStore.transition
    landed: list = []

    def transition(self, *args, **kwargs):
        if kwargs["to"] is to and not landed:
            try:
                landed.append(action())
            except BrokerError as exc:
                landed.append(exc)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(TransactionStore, "transition", transition)
    return landed


def test_a_part_acknowledged_while_the_commit_moves_is_committed(txn_broker, monkeypatch):
    """A part send landing between the commit's read and its OPEN -> COMMITTING move was
    acknowledged (duplicate False): the commit carries it, and a resend is a duplicate."""
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"a")
    landed = _landing_before(monkeypatch, TxnState.COMMITTING, lambda: half(b, "tx1", b"b", part=1))
    result = b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert result.state is TxnState.COMMITTED
    [sent] = landed
    assert not isinstance(sent, BrokerError) and not sent.duplicate
    assert visible(b) == [b"a", b"b"]  # the acknowledged part is not lost
    assert half(b, "tx1", b"b", part=1).duplicate
    assert half_objects(b) == []


def test_a_part_sent_after_the_commit_started_is_refused_and_stores_nothing(
    txn_broker, clock, monkeypatch
):
    """Once COMMITTING, a send is refused with a 409 (never acknowledged and dropped), also
    while the commit is unfinished after a crash and after the checker finished it."""
    from cirrusmq_broker.storage.appends import BatchAppender

    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"a")
    with monkeypatch.context() as patch:

        def die(self, *args, **kwargs):
            raise SimulatedCrash()

        patch.setattr(BatchAppender, "append", die)
        with pytest.raises(SimulatedCrash):
            b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert b.transactions.describe(PG, "tx1").state is TxnState.COMMITTING
    with pytest.raises(TransactionAlreadyEnded) as refused:
        half(b, "tx1", b"late", part=1)
    assert refused.value.http_status == 409
    assert refused.value.details["state"] == TxnState.COMMITTING.value
    clock.advance(61)
    assert b.transactions.run_checks().committed == 1
    with pytest.raises(TransactionAlreadyEnded):
        half(b, "tx1", b"late", part=1)
    assert visible(b) == [b"a"]
    assert half_objects(b) == []


def test_a_part_acknowledged_while_the_rollback_moves_leaves_no_half_object(
    txn_broker, monkeypatch
):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"a")
    landed = _landing_before(
        monkeypatch, TxnState.ROLLED_BACK, lambda: half(b, "tx1", b"b", part=1)
    )
    result = b.transactions.end(PG, "tx1", Resolution.ROLLBACK, producer=("p1", 1))
    assert result.state is TxnState.ROLLED_BACK
    assert not landed[0].duplicate
    assert half_objects(b) == []  # the part that landed is discarded with the others
    with pytest.raises(TransactionAlreadyEnded):
        half(b, "tx1", b"c", part=2)
    assert visible(b) == [] and half_objects(b) == []


def test_the_checkers_last_rollback_racing_a_commit_leaves_it_committed(
    txn_broker, clock, monkeypatch
):
    """The checker decides to roll back (out of checks) while the producer's commit moves
    the transaction on: the commit wins, and the checker's pass reports no failure."""
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"paid", timings=CheckTimings(0, 1, 1))
    assert b.transactions.run_checks().asked == 1
    clock.advance(2)
    landed = _landing_before(
        monkeypatch,
        TxnState.ROLLED_BACK,
        lambda: b.transactions.end(PG, "tx1", Resolution.COMMIT, producer=("p1", 1)),
    )
    report = b.transactions.run_checks()
    assert landed[0].state is TxnState.COMMITTED
    assert (report.rolled_back, report.failed) == (0, 0)
    txn = b.transactions.describe(PG, "tx1")
    assert (txn.state, txn.last_error) == (TxnState.COMMITTED, None)
    assert visible(b) == [b"paid"]


def test_the_checkers_rollback_racing_a_part_send_discards_every_part(
    txn_broker, clock, monkeypatch
):
    b = txn_broker
    b.transactions.register(PG, "p1")
    half(b, "tx1", b"a", timings=CheckTimings(0, 1, 1))
    assert b.transactions.run_checks().asked == 1
    clock.advance(2)
    landed = _landing_before(
        monkeypatch, TxnState.ROLLED_BACK, lambda: half(b, "tx1", b"b", part=1)
    )
    report = b.transactions.run_checks()
    assert not landed[0].duplicate
    assert (report.rolled_back, report.failed) == (1, 0)
    assert b.transactions.describe(PG, "tx1").state is TxnState.ROLLED_BACK
    assert visible(b) == [] and half_objects(b) == []


def test_a_commit_conflicting_with_its_registrations_refresh_never_answers_a_fault(settings, clock):
    import dataclasses

    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.errors import BrokerError
    from cirrusmq_broker.model import MessageInput
    from cirrusmq_broker.rules.transaction_state import Resolution

    names = _table_name("TransactionsTable")
    b = Broker(dataclasses.replace(settings, transactions_table=names), clock)
    b.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    b.transactions.register("pg", "p1")
    b.transactions.send(
        "pg", "tx1", transactional_id="p1", epoch=1, topic_name="pay", inputs=[MessageInput(b"a")]
    )
    client = b.transactions._store._client
    calls: list[str] = []

    def conflicting(params, **_):
        if calls:
            return None
        calls.append("conflict")
        # the fence check on the registration item conflicts with a concurrent write to it
        reasons = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing"},
            {"Code": "None"},
        ]
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": reasons,
        }
        return DynamoAnswer(400), parsed

    event = "before-call.dynamodb.TransactWriteItems"
    client.meta.events.register(event, conflicting)
    try:
        # a 409 / 503 the producer retries is fine; a 500 is not
        with contextlib.suppress(BrokerError):
            b.transactions.end("pg", "tx1", Resolution.COMMIT, producer=("p1", 1))
    finally:
        client.meta.events.unregister(event, conflicting)
    assert calls == ["conflict"]


@pytest.fixture
def b(txn_broker) -> Broker:
    """The transactions broker under a short name."""
    return txn_broker


def half_in(broker, pg, txid, *bodies, part=0, tid="p1", epoch=1, topic="pay", timings=None, **kw):
    """A half send of the producer group ``pg``'s transaction ``txid``."""
    return broker.transactions.send(
        pg,
        txid,
        transactional_id=tid,
        epoch=epoch,
        topic_name=topic,
        inputs=[MessageInput(x, **kw) for x in bodies],
        part=part,
        timings=timings,
    )


def objects_of(broker, topic: str) -> list[str]:
    """Keys of the objects of one topic."""
    return [k for k in object_keys(broker) if k.startswith(f"topics/topic={topic}/")]


def test_a_commit_touching_64_queues_is_appended_in_chunks_once_even_after_a_crash(b, clock):
    b.admin.create_topic("wide", queues=64, message_type="TRANSACTION")
    b.transactions.register("pg", "p1")
    bodies = [b"x%d" % i for i in range(400)]
    sent = b.transactions.send(
        "pg",
        "t",
        transactional_id="p1",
        epoch=1,
        topic_name="wide",
        inputs=[MessageInput(x, message_group=f"g{i}") for i, x in enumerate(bodies)],
    )
    assert len({r.queue for r in sent.receipts}) > 49
    appender = b.transactions._writer
    real, calls = appender.append, []

    def crash_after_first_chunk(*args, **kwargs):
        calls.append(kwargs["stamp"])
        if len(calls) == 2:
            raise RuntimeError("the Lambda died between two chunks")
        return real(*args, **kwargs)

    appender.append = crash_after_first_chunk
    with pytest.raises(RuntimeError):
        b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    appender.append = real
    assert b.transactions._store.get("pg", "t").state is TxnState.COMMITTING
    clock.advance(61)  # the checker resumes it: the first chunk is AlreadyRecorded
    assert b.transactions.run_checks().committed == 1
    assert b.transactions._store.get("pg", "t").state is TxnState.COMMITTED
    assert visible(b, "wide") == sorted(bodies)  # every message once
    assert half_objects(b) == []


def test_a_plain_send_over_49_queues_is_too_many_queues_and_stores_nothing(b):
    b.admin.create_topic("wide", queues=64)
    with pytest.raises(TooManyQueues) as info:
        b.produce.send("wide", [MessageInput(b"x", message_group=f"g{i}") for i in range(400)])
    assert info.value.http_status == 400
    assert objects_of(b, "wide") == []
    # 49 queues still go in one send
    groups: list[str] = []
    n = 0
    while len(groups) < 49:
        n += 1
        g = f"k{n}"
        if _queue_of(g, 64) not in {_queue_of(x, 64) for x in groups}:
            groups.append(g)
    result = b.produce.send("wide", [MessageInput(b"y", message_group=g) for g in groups])
    assert len({r.queue for r in result.receipts}) == 49


def _queue_of(group: str, queues: int) -> int:
    import zlib

    return zlib.crc32(group.encode()) % queues


def test_a_registration_belongs_to_the_key_that_made_it(b, clock):
    svc = b.transactions
    assert svc.register("payments", "svc-1", access_key="AK-pay") == 1
    half_in(b, "payments", "t1", b"secret", tid="svc-1", timings=CheckTimings(0, 30, 15))
    with pytest.raises(AccessDenied):  # another key cannot fence the real producer
        svc.register("payments", "svc-1", access_key="AK-audit")
    assert svc._store.epoch("payments", "svc-1") == 1
    with pytest.raises(AccessDenied):
        svc.send(
            "payments",
            "t2",
            transactional_id="svc-1",
            epoch=1,
            topic_name="pay",
            inputs=[MessageInput(b"x")],
            access_key="AK-audit",
        )
    with pytest.raises(AccessDenied):
        svc.end("payments", "t1", Resolution.ROLLBACK, producer=("svc-1", 1), access_key="AK-audit")
    with pytest.raises(AccessDenied):
        svc.end("payments", "t1", Resolution.UNKNOWN, producer=("svc-1", 1), access_key="AK-audit")
    clock.advance(1)
    svc.run_checks()
    with pytest.raises(AccessDenied):  # nor read (and claim) its checks
        svc.poll_checks("payments", "svc-1", 1, access_key="AK-audit")
    assert half_objects(b) and svc._store.get("payments", "t2") is None
    # the owner: checks only of topics it may publish to
    assert (
        svc.poll_checks("payments", "svc-1", 1, access_key="AK-pay", allowed=lambda t: False) == []
    )
    got = svc.poll_checks("payments", "svc-1", 1, access_key="AK-pay", allowed=lambda t: t == "pay")
    assert [c.transaction_id for c in got] == ["t1"]
    # an admin may take a registration over (recorded as its own from then on)
    assert svc.register("payments", "svc-1", access_key="AK-admin", admin=True) == 2
    with pytest.raises(AccessDenied):
        svc.register("payments", "svc-1", access_key="AK-pay")


def test_a_plain_send_cannot_take_the_commit_stamp(b):
    b.transactions.register("orders", "p1")
    half_in(b, "orders", "tx1", b"paid")
    b.produce.send("plain", [MessageInput(b"x")], stamp=ProducerStamp("txn.orders.tx1", 0))
    with pytest.raises(InvalidRequest):  # the commit's own stamp is not a user producer id
        b.produce.send("plain", [MessageInput(b"x")], stamp=ProducerStamp("~txn.orders.tx1", 0))
    result = b.transactions.end("orders", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert result.state is TxnState.COMMITTED
    assert visible(b) == [b"paid"]


def test_a_commit_is_never_marked_committed_on_another_appends_record(b):
    b.transactions.register("orders", "p1")
    half_in(b, "orders", "tx1", b"paid")
    put = b.producers.put_request(
        ProducerStamp(commit_stamp_id("orders", "tx1"), 0),
        ProducerRecord("someone else", {0: 0}),
        expires_at=2**31,
    )["Put"]
    boto3.client("dynamodb", region_name="us-east-1").put_item(**put)
    with pytest.raises(Conflict):
        b.transactions.end("orders", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert b.transactions._store.get("orders", "tx1").state is TxnState.COMMITTING
    assert half_objects(b)  # kept: nothing was delivered


@pytest.mark.parametrize(
    ("first", "second"), [(("a", "b-c"), ("a-b", "c")), (("g1", "x:1"), ("g1", "x_1"))]
)
def test_committed_objects_of_two_transactions_never_collide(b, first, second):
    for pg in {first[0], second[0]}:
        b.transactions.register(pg, "p1")
    for pg, txid in (first, second):
        half_in(
            b, pg, txid, f"{pg}/{txid}-1".encode(), f"{pg}/{txid}-2".encode(), message_group="m"
        )
        b.transactions.end(pg, txid, Resolution.COMMIT, producer=("p1", 1))
    assert committed_name(*first) != committed_name(*second)
    expected = [f"{pg}/{txid}-{n}".encode() for pg, txid in (first, second) for n in (1, 2)]
    assert visible(b) == sorted(expected)  # each once: none lost, none duplicated


def test_a_commit_never_overwrites_another_object(b, clock):
    b.transactions.register("orders", "p1")
    half_in(b, "orders", "tx1", b"paid", message_group="m")
    txn = b.transactions._store.get("orders", "tx1")
    queue = txn.objects[0].queue
    key = object_key("pay", queue, clock(), committed_name("orders", "tx1"))
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.put_object(Bucket=b.settings.bucket, Key=key, Body=b"somebody else's batch")
    with pytest.raises(Exception) as info:
        b.transactions.end("orders", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert type(info.value).__name__ == "TopicObjectTaken"
    assert s3.get_object(Bucket=b.settings.bucket, Key=key)["Body"].read() == (
        b"somebody else's batch"
    )


def test_a_transaction_recording_too_many_ids_is_transaction_too_large(b):
    b.transactions.register("big", "p1")
    with pytest.raises(TransactionTooLarge) as info:
        for part in range(12):
            b.transactions.send(
                "big",
                "tx",
                transactional_id="p1",
                epoch=1,
                topic_name="pay",
                inputs=[
                    MessageInput(b"x", message_id=f"{part:03d}-" + "m" * 100 + f"{i:05d}")
                    for i in range(1000)
                ],
                part=part,
            )
    assert info.value.http_status == 400 and isinstance(info.value, BrokerError)
    txn = b.transactions._store.get("big", "tx")
    refused = len(txn.parts)
    assert refused >= 2
    assert not [k for k in half_objects(b) if f"/{refused}-" in k]  # the refused part left nothing
    assert b.transactions.end("big", "tx", Resolution.COMMIT, producer=("p1", 1)).changed
    assert len(visible(b)) == refused * 1000


def test_a_check_that_cannot_be_published_is_not_counted_and_is_pushed_back(b, clock, monkeypatch):
    svc = b.transactions
    svc.register("pg1", "p1")
    half_in(b, "pg1", "t1", b"x", timings=CheckTimings(0, 1, 3))
    half_in(b, "pg1", "t2", b"y", timings=CheckTimings(0, 1, 3))
    store = svc._store
    real = store.add_pending

    def throttled(*args, **kwargs):
        raise RuntimeError("throttled")

    monkeypatch.setattr(store, "add_pending", throttled)
    for _ in range(8):
        clock.advance(2)
        svc.run_checks()
    txn = store.get("pg1", "t1")
    assert txn.state is TxnState.OPEN and txn.checks == 0  # never rolled back unasked
    assert txn.check_failures >= 3 and "throttled" in txn.last_error
    assert svc.next_due_in(1) is None  # pushed back: no spinning
    monkeypatch.setattr(store, "add_pending", real)
    clock.advance(120)
    assert svc.run_checks().asked == 2
    txn = store.get("pg1", "t1")
    assert txn.checks == 1 and txn.check_failures == 0
    assert store.pending_checks("pg1") == {"t1", "t2"}


def test_a_failing_transaction_backs_off_and_does_not_hide_the_others(b, clock, monkeypatch):
    svc = b.transactions
    svc.register("pg2", "p1")
    half_in(b, "pg2", "bad", b"x")
    half_in(b, "pg2", "good", b"y")
    store = svc._store
    now = clock()
    for txid in ("bad", "good"):
        store.transition(
            "pg2",
            txid,
            expect=(TxnState.OPEN,),
            to=TxnState.COMMITTING,
            now=now,
            values={"commit_started_at": now, "next_check_at": now + 60_000},
        )
    real = svc._halves.get

    def broken(key):
        if "/bad/" in key:
            raise RuntimeError("S3 says no")
        return real(key)

    monkeypatch.setattr(svc._halves, "get", broken)
    clock.advance(61)
    report = svc.run_checks()
    assert (report.failed, report.committed) == (1, 1)
    assert svc.run_checks().failed == 0  # not retried in the very next pass
    assert svc.next_due_in(55) > 0
    bad = store.get("pg2", "bad")
    assert bad.state is TxnState.COMMITTING and bad.check_failures == 1
    assert "S3 says no" in bad.last_error
    for _ in range(4):
        clock.advance(60)
        svc.run_checks()
    assert store.get("pg2", "bad").check_failures == 5
    monkeypatch.setattr(svc._halves, "get", real)
    clock.advance(60)
    assert svc.run_checks().committed == 1
    assert visible(b) == [b"x", b"y"]


def test_a_commit_after_the_retention_rolls_back_with_a_reason(b, clock):
    b.admin.create_topic("short", queues=1, message_type="TRANSACTION", retention_hours=1)
    b.transactions.register("pg", "p1")
    half_in(b, "pg", "late", b"x", topic="short", timings=CheckTimings(7200, 7200, 15))
    clock.advance(3601)
    with pytest.raises(TransactionAlreadyEnded) as info:
        b.transactions.end("pg", "late", Resolution.COMMIT, producer=("p1", 1))
    assert info.value.http_status == 409 and "retention" in str(info.value)
    txn = b.transactions._store.get("pg", "late")
    assert txn.state is TxnState.ROLLED_BACK and "retention" in txn.end_reason
    assert half_objects(b) == [] and visible(b, "short") == []


def test_a_committing_transaction_whose_halves_expired_rolls_back(b, clock):
    b.transactions.register("pg2", "p1")
    half_in(b, "pg2", "t2", b"x")
    store = b.transactions._store
    now = clock()
    store.transition(
        "pg2",
        "t2",
        expect=(TxnState.OPEN,),
        to=TxnState.COMMITTING,
        now=now,
        values={"commit_started_at": now, "next_check_at": now + 60_000},
    )
    b.transactions._halves.delete(half_objects(b))
    clock.advance(61)
    assert b.transactions.run_checks().rolled_back == 1
    txn = store.get("pg2", "t2")
    assert txn.state is TxnState.ROLLED_BACK and "expired" in txn.end_reason
    assert b.transactions.next_due_in(3600) is None


def test_an_open_transaction_with_a_missing_half_does_not_break_the_polls(b, clock):
    svc = b.transactions
    svc.register("pg3", "p1")
    for txid, body in (("t3", b"x"), ("t4", b"y")):
        half_in(b, "pg3", txid, body, timings=CheckTimings(0, 30, 15))
    svc._halves.delete([k for k in half_objects(b) if k.startswith("half/pg3/t3/")])
    clock.advance(1)
    svc.run_checks()
    got = svc.poll_checks("pg3", "p1", 1, max_checks=10)
    assert [c.transaction_id for c in got] == ["t4"]
    assert svc._store.get("pg3", "t3").state is TxnState.ROLLED_BACK


def test_a_send_retried_after_the_end_leaves_no_half_object(b):
    b.transactions.register("pg", "p1")
    half_in(b, "pg", "t", b"x")
    b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    again = half_in(b, "pg", "t", b"x")
    assert again.duplicate and half_objects(b) == []


def test_a_full_check_inbox_counts_no_check(b, clock, monkeypatch):
    from cirrusmq_broker.services.transactions import checks as transaction_checks

    monkeypatch.setattr(transaction_checks, "MAX_PENDING_CHECKS", 1)
    svc = b.transactions
    svc.register("pg4", "p1")
    half_in(b, "pg4", "t1", b"x", timings=CheckTimings(0, 30, 15))
    clock.advance(1)
    assert svc.run_checks().asked == 1
    half_in(b, "pg4", "t2", b"y", timings=CheckTimings(0, 30, 15))
    clock.advance(1)
    report = svc.run_checks()
    assert (report.asked, report.failed) == (0, 1)
    t2 = svc._store.get("pg4", "t2")
    assert t2.checks == 0 and "inbox is full" in t2.last_error
    assert svc._store.pending_checks("pg4") == {"t1"}


def test_a_client_message_id_in_two_parts_is_refused(b):
    b.transactions.register("pg", "p1")
    half_in(b, "pg", "t", b"a", message_id="order-7")
    with pytest.raises(InvalidRequest) as info:
        half_in(b, "pg", "t", b"b", part=1, message_id="order-7")
    assert "already in part 0" in str(info.value)
    assert half_in(b, "pg", "t", b"a", message_id="order-7").duplicate  # a retry of part 0
    assert [k for k in half_objects(b) if "/1-" in k] == []
    b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    assert visible(b) == [b"a"]


def test_a_late_resume_does_not_index_an_old_unindexed_commit_object(b, clock, monkeypatch):
    """An object an earlier attempt wrote and never indexed is the orphan sweeper's once it
    is old: a resume then writes the batch under a fresh key (the day of the commit)."""
    b.transactions.register("pg", "p1")
    half_in(b, "pg", "t", b"x", message_group="m")
    appender = b.transactions._writer
    real = appender.append

    def crash(*args, **kwargs):
        raise RuntimeError("the Lambda died before the append")

    appender.append = crash
    with pytest.raises(RuntimeError):
        b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    appender.append = real
    first = objects_of(b, "pay")
    assert len(first) == 1
    monkeypatch.setattr(b.transactions._writer._objects, "age_seconds", lambda key: 3600.0)
    clock.advance(61)
    assert b.transactions.run_checks().committed == 1
    assert visible(b) == [b"x"]
    indexed = set(objects_of(b, "pay")) - set(first)
    assert len(indexed) == 1  # the old one is left to the sweeper


def test_a_one_request_registration_leaves_a_later_epoch_and_its_owner(b) -> None:
    """A one-request registration (a resent half-message publish) of an id registered
    since at a later epoch answers that epoch and leaves it, and another key's
    registration of the id is refused: registering epoch 1 is conditional on none."""
    assert b.transactions.register_once(PG, "p1", access_key="k1") == 1
    assert b.transactions.register(PG, "p1", access_key="k1") == 2
    assert b.transactions.register_once(PG, "p1", access_key="k1") == 2
    with pytest.raises(AccessDenied):
        b.transactions.register_once(PG, "p1", access_key="k2")
