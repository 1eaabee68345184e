"""Adversarial review of the txn18 branch (transactions, redrive claims, queue heads that
outlive their topic). Each test demonstrates one finding and is expected to fail on the
reviewed code."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from cirrusmq_broker.storage.move_records import MoveRecords
from test_dead_letters import dead_letters, stream_count

REPO = Path(__file__).resolve().parents[2]
PREVIOUS_RELEASE = "c8152e5"  # the merge-base: the code a deployment runs before txn18


def previous_dead_letters(broker):
    """The dead-letter service of the release before txn18, on the same tables (a deployment
    that redrove letters before the upgrade)."""
    source = subprocess.check_output(
        [
            "git",
            "show",
            f"{PREVIOUS_RELEASE}:layers/broker/cirrusmq_broker/services/dead_letters.py",
        ],
        cwd=REPO,
    )
    name = "cirrusmq_broker.services._dead_letters_before_txn18"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cirrusmq_broker.services"
    sys.modules[name] = module
    exec(compile(source, "dead_letters@" + PREVIOUS_RELEASE, "exec"), module.__dict__)
    new = broker.dead_letters
    return module.DeadLetterService(
        topics=new._topics,
        moves=new._moves,
        index=new._index,
        heads=new._heads,
        reader=new._reader,
        configs=new._configs,
        clock=new._clock,
        records=MoveRecords(broker._dynamodb, broker.settings.producers_table),
    )


def test_letters_redriven_before_the_upgrade_are_not_sent_back_again(broker, clock):
    letters = dead_letters(broker, "t", b"a", b"b")
    ids = [d.message.message_id for d in letters]
    assert previous_dead_letters(broker).redrive("g").redriven == 2
    assert stream_count(broker, "t#") == 4  # 2 sent + each redriven once, before the upgrade
    # the deployment is upgraded to txn18; the operator redrives again (by topic, by id)
    broker.dead_letters.redrive("g", topic="t")
    broker.dead_letters.redrive("g", message_ids=ids)
    assert stream_count(broker, "t#") == 4, "a letter redriven before the upgrade was sent twice"


def test_listing_marks_letters_redriven_before_the_upgrade(broker, clock):
    dead_letters(broker, "t", b"a", b"b")
    previous = previous_dead_letters(broker)
    assert previous.redrive("g").redriven == 2
    assert [d.redriven for d in previous.list("g").dead_letters] == [True, True]
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, True]


def test_letter_redriven_by_id_before_the_upgrade_is_not_sent_back_by_a_cursor(broker, clock):
    a, _ = dead_letters(broker, "t", b"a", b"b")
    previous = previous_dead_letters(broker)
    assert previous.redrive("g", message_ids=[a.message.message_id]).redriven == 1
    assert stream_count(broker, "t#") == 3
    broker.dead_letters.redrive("g")
    assert stream_count(broker, "t#") == 4, "the letter redriven by id was sent back again"


class _Answer:
    """An HTTP answer of DynamoDB as botocore's ``before-call`` short-circuit takes it."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


def test_two_containers_creating_one_topic_at_once_never_answer_a_fault(settings, clock):
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.errors import BrokerError

    first, second = Broker(settings, clock), Broker(settings, clock)
    client = first.admin._store._client
    calls: list[str] = []

    def overlapping(params, **_):
        """The other container's create holds the items when this one's transaction
        arrives (what DynamoDB answers the loser: TransactionConflict per item)."""
        if calls:
            return None
        calls.append("conflict")
        second.admin.create_topic("t", queues=2)
        # the topic put and the two heads' reopen updates, all touched by the other one
        reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing"}] * 3
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": reasons,
        }
        return _Answer(400), parsed

    event = "before-call.dynamodb.TransactWriteItems"
    client.meta.events.register(event, overlapping)
    try:
        with pytest.raises(BrokerError):  # 409 TopicAlreadyExists (or 503 Busy), never a 500
            first.admin.create_topic("t", queues=2)
    finally:
        client.meta.events.unregister(event, overlapping)
    assert calls == ["conflict"]


def test_a_janitor_run_overlapping_another_leaves_a_recreated_topic_alone(settings, clock):
    from broker_helpers import send
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    admin, late = Broker(settings, clock), Broker(settings, clock)
    admin.admin.create_topic("t", queues=1)
    send(admin, "t", b"old")
    admin.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    listed = late.janitor._topics.list()  # a second run (e.g. a duplicate schedule
    # delivery) lists the topics while the first one purges
    assert admin.janitor.purge_deleted_topics() == ["t"]
    admin.admin.create_topic("t", queues=1)  # "created again once the purge is done"
    [receipt] = send(admin, "t", b"new")  # acknowledged
    late.janitor._topics.list = lambda: listed  # the late run goes on from its listing
    late.janitor.purge_deleted_topics()
    assert admin.topic_store.get("t", consistent=True) is not None, "the new topic is gone"
    got = admin.consume.receive("g", "t")
    assert [m.message.body for m in got] == [b"new"], "an acknowledged message was purged"


def test_a_commit_conflicting_with_its_registrations_refresh_never_answers_a_fault(settings, clock):
    import dataclasses

    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.errors import BrokerError
    from cirrusmq_broker.services.produce import MessageInput
    from cirrusmq_broker.transaction_state import Resolution
    from test_transactions import _table_name

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
        return _Answer(400), parsed

    event = "before-call.dynamodb.TransactWriteItems"
    client.meta.events.register(event, conflicting)
    try:
        # a 409 / 503 the producer retries is fine; a 500 is not
        with contextlib.suppress(BrokerError):
            b.transactions.end("pg", "tx1", Resolution.COMMIT, producer=("p1", 1))
    finally:
        client.meta.events.unregister(event, conflicting)
    assert calls == ["conflict"]
