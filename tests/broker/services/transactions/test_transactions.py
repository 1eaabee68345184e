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
    BrokerError,
    DelayNotAllowed,
    IdempotencyConflict,
    InvalidMessage,
    InvalidRequest,
    NotTransactional,
    ProducerFenced,
    ProducerNotRegistered,
    TopicNotFound,
    TransactionAlreadyEnded,
    TransactionNotFound,
    TransactionRequired,
    TransactionTopicMismatch,
)
from cirrusmq_broker.rules.transaction_state import CheckTimings, Resolution, TxnState
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.storage.clients import observe_calls

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
    assert len(send_calls) <= 3 and len(commit_calls) <= 8  # 2 reads only while cold; the
    # commit object is a conditional put of the half's content (GET + PUT If-None-Match)


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
    from cirrusmq_broker.rules.transaction_state import Resolution
    from cirrusmq_broker.services.produce import MessageInput

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
