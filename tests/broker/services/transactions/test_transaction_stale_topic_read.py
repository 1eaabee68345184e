"""A transaction's topic read eventually consistently may find nothing (a replica behind
the topic's write): neither a commit nor the checker takes that for a deleted topic and
rolls the transaction back. Only a topic a consistent read finds gone does."""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from broker_helpers import lagging_item_reads
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.transaction_state import CheckTimings, Resolution, TxnState
from cirrusmq_broker.storage.clients import aws_client

PG = "orders-pg"


@pytest.fixture
def txn_broker(settings, clock) -> Broker:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    broker = Broker(dataclasses.replace(settings, transactions_table=table), clock)
    broker.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    broker.transactions.register(PG, "p1")
    return broker


def half(broker: Broker, txid: str, body: bytes, timings: CheckTimings | None = None) -> None:
    broker.transactions.send(
        PG,
        txid,
        transactional_id="p1",
        epoch=1,
        topic_name="pay",
        inputs=[MessageInput(body)],
        part=0,
        timings=timings,
    )


def lagging_topics(broker: Broker):
    client = aws_client("dynamodb", broker.settings)
    return lagging_item_reads(client, broker.settings.topics_table)


def visible(broker: Broker) -> list[bytes]:
    got = []
    while batch := broker.consume.receive("g", "pay", max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack("g", [m.receipt_handle for m in batch])
    return sorted(got)


def test_a_commit_with_a_stale_topic_read_commits(txn_broker, clock):
    half(txn_broker, "tx1", b"paid")
    other = Broker(txn_broker.settings, clock)  # another container: no topic cached
    with lagging_topics(txn_broker):
        other.transactions.end(PG, "tx1", Resolution.COMMIT)
    assert txn_broker.transactions.describe(PG, "tx1").state is TxnState.COMMITTED
    assert visible(txn_broker) == [b"paid"]


def test_the_checker_with_a_stale_topic_read_asks_instead_of_rolling_back(txn_broker, clock):
    half(txn_broker, "tx1", b"paid", timings=CheckTimings(6, 30, 15))
    clock.advance(7)
    checker = Broker(txn_broker.settings, clock)
    with lagging_topics(txn_broker):
        report = checker.transactions.run_checks()
    assert (report.asked, report.rolled_back) == (1, 0)
    assert txn_broker.transactions.describe(PG, "tx1").state is TxnState.OPEN
