"""Regression tests of the transactions review (issue 10 follow-up), on in-process moto.

Each test reproduces one reviewed finding (it failed before the fix): wide commits, the
access key of a registration, internal commit stamps, committed object names, the size of
the transaction item, checks counted but never published, failing checks that spin,
commits past the retention, retried sends after the end, plain sends over 49 queues.
"""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from broker_helpers import object_keys
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import (
    AccessDenied,
    BrokerError,
    Conflict,
    InvalidRequest,
    TooManyQueues,
    TransactionAlreadyEnded,
    TransactionTooLarge,
)
from cirrusmq_broker.model import ProducerStamp
from cirrusmq_broker.rules.transaction_state import (
    CheckTimings,
    Resolution,
    TxnState,
    commit_stamp_id,
    committed_name,
)
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.storage.batch_objects import object_key
from cirrusmq_broker.storage.producers import ProducerRecord


@pytest.fixture
def b(settings, clock) -> Broker:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    broker = Broker(dataclasses.replace(settings, transactions_table=table), clock)
    broker.admin.create_topic("pay", queues=2, message_type="TRANSACTION")
    broker.admin.create_topic("plain", queues=1)
    return broker


def half(broker, pg, txid, *bodies, part=0, tid="p1", epoch=1, topic="pay", timings=None, **kw):
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


def visible(broker, topic="pay", group="g") -> list[bytes]:
    got = []
    while batch := broker.consume.receive(group, topic, max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack(group, [m.receipt_handle for m in batch])
    return sorted(got)


def halves(broker) -> list[str]:
    return [k for k in object_keys(broker) if k.startswith("half/")]


def topic_objects(broker, topic: str) -> list[str]:
    return [k for k in object_keys(broker) if k.startswith(f"topics/topic={topic}/")]


# ------------------------------------------------------------- 1. more than 49 queues
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
    assert halves(b) == []


def test_a_plain_send_over_49_queues_is_too_many_queues_and_stores_nothing(b):
    b.admin.create_topic("wide", queues=64)
    with pytest.raises(TooManyQueues) as info:
        b.produce.send("wide", [MessageInput(b"x", message_group=f"g{i}") for i in range(400)])
    assert info.value.http_status == 400
    assert topic_objects(b, "wide") == []
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


# ------------------------------------------------------------------------ 2. access
def test_a_registration_belongs_to_the_key_that_made_it(b, clock):
    svc = b.transactions
    assert svc.register("payments", "svc-1", access_key="AK-pay") == 1
    half(b, "payments", "t1", b"secret", tid="svc-1", timings=CheckTimings(0, 30, 15))
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
    assert halves(b) and svc._store.get("payments", "t2") is None
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


# ------------------------------------------------------------ 3. internal commit stamp
def test_a_plain_send_cannot_take_the_commit_stamp(b):
    b.transactions.register("orders", "p1")
    half(b, "orders", "tx1", b"paid")
    b.produce.send("plain", [MessageInput(b"x")], stamp=ProducerStamp("txn.orders.tx1", 0))
    with pytest.raises(InvalidRequest):  # the commit's own stamp is not a user producer id
        b.produce.send("plain", [MessageInput(b"x")], stamp=ProducerStamp("~txn.orders.tx1", 0))
    result = b.transactions.end("orders", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert result.state is TxnState.COMMITTED
    assert visible(b) == [b"paid"]


def test_a_commit_is_never_marked_committed_on_another_appends_record(b):
    b.transactions.register("orders", "p1")
    half(b, "orders", "tx1", b"paid")
    put = b.producers.put_request(
        ProducerStamp(commit_stamp_id("orders", "tx1"), 0),
        ProducerRecord("someone else", {0: 0}),
        expires_at=2**31,
    )["Put"]
    boto3.client("dynamodb", region_name="us-east-1").put_item(**put)
    with pytest.raises(Conflict):
        b.transactions.end("orders", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert b.transactions._store.get("orders", "tx1").state is TxnState.COMMITTING
    assert halves(b)  # kept: nothing was delivered


# ----------------------------------------------------------- 4. committed object names
@pytest.mark.parametrize(
    ("first", "second"), [(("a", "b-c"), ("a-b", "c")), (("g1", "x:1"), ("g1", "x_1"))]
)
def test_committed_objects_of_two_transactions_never_collide(b, first, second):
    for pg in {first[0], second[0]}:
        b.transactions.register(pg, "p1")
    for pg, txid in (first, second):
        half(b, pg, txid, f"{pg}/{txid}-1".encode(), f"{pg}/{txid}-2".encode(), message_group="m")
        b.transactions.end(pg, txid, Resolution.COMMIT, producer=("p1", 1))
    assert committed_name(*first) != committed_name(*second)
    expected = [f"{pg}/{txid}-{n}".encode() for pg, txid in (first, second) for n in (1, 2)]
    assert visible(b) == sorted(expected)  # each once: none lost, none duplicated


def test_a_commit_never_overwrites_another_object(b, clock):
    b.transactions.register("orders", "p1")
    half(b, "orders", "tx1", b"paid", message_group="m")
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


# ---------------------------------------------------------- 5. transaction item size
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
    assert not [k for k in halves(b) if f"/{refused}-" in k]  # the refused part left nothing
    assert b.transactions.end("big", "tx", Resolution.COMMIT, producer=("p1", 1)).changed
    assert len(visible(b)) == refused * 1000


# --------------------------------------------------- 6./7. checks: publish, then count
def test_a_check_that_cannot_be_published_is_not_counted_and_is_pushed_back(b, clock, monkeypatch):
    svc = b.transactions
    svc.register("pg1", "p1")
    half(b, "pg1", "t1", b"x", timings=CheckTimings(0, 1, 3))
    half(b, "pg1", "t2", b"y", timings=CheckTimings(0, 1, 3))
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
    half(b, "pg2", "bad", b"x")
    half(b, "pg2", "good", b"y")
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


# ------------------------------------------------------------------ 8. retention edge
def test_a_commit_after_the_retention_rolls_back_with_a_reason(b, clock):
    b.admin.create_topic("short", queues=1, message_type="TRANSACTION", retention_hours=1)
    b.transactions.register("pg", "p1")
    half(b, "pg", "late", b"x", topic="short", timings=CheckTimings(7200, 7200, 15))
    clock.advance(3601)
    with pytest.raises(TransactionAlreadyEnded) as info:
        b.transactions.end("pg", "late", Resolution.COMMIT, producer=("p1", 1))
    assert info.value.http_status == 409 and "retention" in str(info.value)
    txn = b.transactions._store.get("pg", "late")
    assert txn.state is TxnState.ROLLED_BACK and "retention" in txn.end_reason
    assert halves(b) == [] and visible(b, "short") == []


def test_a_committing_transaction_whose_halves_expired_rolls_back(b, clock):
    b.transactions.register("pg2", "p1")
    half(b, "pg2", "t2", b"x")
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
    b.transactions._halves.delete(halves(b))
    clock.advance(61)
    assert b.transactions.run_checks().rolled_back == 1
    txn = store.get("pg2", "t2")
    assert txn.state is TxnState.ROLLED_BACK and "expired" in txn.end_reason
    assert b.transactions.next_due_in(3600) is None


def test_an_open_transaction_with_a_missing_half_does_not_break_the_polls(b, clock):
    svc = b.transactions
    svc.register("pg3", "p1")
    for txid, body in (("t3", b"x"), ("t4", b"y")):
        half(b, "pg3", txid, body, timings=CheckTimings(0, 30, 15))
    svc._halves.delete([k for k in halves(b) if k.startswith("half/pg3/t3/")])
    clock.advance(1)
    svc.run_checks()
    got = svc.poll_checks("pg3", "p1", 1, max_checks=10)
    assert [c.transaction_id for c in got] == ["t4"]
    assert svc._store.get("pg3", "t3").state is TxnState.ROLLED_BACK


# ------------------------------------------------------------------------- 10. minor
def test_a_send_retried_after_the_end_leaves_no_half_object(b):
    b.transactions.register("pg", "p1")
    half(b, "pg", "t", b"x")
    b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    again = half(b, "pg", "t", b"x")
    assert again.duplicate and halves(b) == []


def test_the_sdk_retrying_a_send_with_a_lost_answer_reuses_its_part_and_ids():
    from cirrusmq.errors import MQError
    from cirrusmq.message import Message
    from cirrusmq.transaction import Transaction, TransactionReceipt

    sent: list[tuple[int, list[str]]] = []

    class LosesTheFirstAnswer:
        def _send(self, txn, part, messages, wire):
            sent.append((part, [w["message_id"] for w in wire]))
            if len(sent) == 1:
                raise MQError("the connection dropped", retriable=True)
            return [TransactionReceipt(w["message_id"], 0, txn.id) for w in wire]

    tx = Transaction(LosesTheFirstAnswer(), "t1")  # type: ignore[arg-type]
    message = Message("pay", b"x")
    with pytest.raises(MQError):
        tx.send(message)
    tx.send(message)  # the application retries the same call
    tx.send(Message("pay", b"y"))
    assert sent[0] == sent[1]  # same part, same ids: stored once on the service
    assert sent[2][0] == sent[0][0] + 1


def test_a_full_check_inbox_counts_no_check(b, clock, monkeypatch):
    from cirrusmq_broker.services import transaction_checks

    monkeypatch.setattr(transaction_checks, "MAX_PENDING_CHECKS", 1)
    svc = b.transactions
    svc.register("pg4", "p1")
    half(b, "pg4", "t1", b"x", timings=CheckTimings(0, 30, 15))
    clock.advance(1)
    assert svc.run_checks().asked == 1
    half(b, "pg4", "t2", b"y", timings=CheckTimings(0, 30, 15))
    clock.advance(1)
    report = svc.run_checks()
    assert (report.asked, report.failed) == (0, 1)
    t2 = svc._store.get("pg4", "t2")
    assert t2.checks == 0 and "inbox is full" in t2.last_error
    assert svc._store.pending_checks("pg4") == {"t1"}


def test_a_client_message_id_in_two_parts_is_refused(b):
    b.transactions.register("pg", "p1")
    half(b, "pg", "t", b"a", message_id="order-7")
    with pytest.raises(InvalidRequest) as info:
        half(b, "pg", "t", b"b", part=1, message_id="order-7")
    assert "already in part 0" in str(info.value)
    assert half(b, "pg", "t", b"a", message_id="order-7").duplicate  # a retry of part 0
    assert [k for k in halves(b) if "/1-" in k] == []
    b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    assert visible(b) == [b"a"]


def test_a_late_resume_does_not_index_an_old_unindexed_commit_object(b, clock, monkeypatch):
    """An object an earlier attempt wrote and never indexed is the orphan sweeper's once it
    is old: a resume then writes the batch under a fresh key (the day of the commit)."""
    b.transactions.register("pg", "p1")
    half(b, "pg", "t", b"x", message_group="m")
    appender = b.transactions._writer
    real = appender.append

    def crash(*args, **kwargs):
        raise RuntimeError("the Lambda died before the append")

    appender.append = crash
    with pytest.raises(RuntimeError):
        b.transactions.end("pg", "t", Resolution.COMMIT, producer=("p1", 1))
    appender.append = real
    first = topic_objects(b, "pay")
    assert len(first) == 1
    monkeypatch.setattr(b.transactions._halves._objects, "age_seconds", lambda key: 3600.0)
    clock.advance(61)
    assert b.transactions.run_checks().committed == 1
    assert visible(b) == [b"x"]
    indexed = set(topic_objects(b, "pay")) - set(first)
    assert len(indexed) == 1  # the old one is left to the sweeper
