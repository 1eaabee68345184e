"""Lookup by key: newest first across batches and queues, pages without duplicates or gaps,
only the objects whose key filter may hold the key are read, nothing stored per message."""

from __future__ import annotations

import base64
import json

import boto3
import pytest
from broker_helpers import send
from cirrusmq_broker.errors import (
    InvalidMessage,
    InvalidRequest,
    InvalidTimestamp,
    TopicNotFound,
)
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.transaction_state import Resolution
from cirrusmq_broker.services import key_lookup
from cirrusmq_broker.services.key_lookup import InvalidPageToken
from cirrusmq_broker.storage.clients import observe_calls


def found(broker, topic: str, key: str, *, limit: int = 100, **window) -> list[bytes]:
    """Every page's bodies, in order (asserts no page repeats a message)."""
    bodies, ids, token = [], set(), None
    while True:
        page = broker.key_lookup.find(topic, key, limit=limit, page_token=token, **window)
        for m in page.messages:
            assert (m.queue, m.offset) not in ids
            ids.add((m.queue, m.offset))
            bodies.append(m.body)
        token = page.next_token
        if token is None:
            return bodies


@pytest.fixture
def orders(broker):
    broker.admin.create_topic("orders", queues=4)
    return broker


def test_messages_with_the_key_are_found_across_batches_and_queues_newest_first(orders, clock):
    for i in range(12):
        send(orders, "orders", f"o1-{i}".encode(), keys=["order-1", f"extra-{i}"])
        send(orders, "orders", f"o2-{i}".encode(), keys=["order-2"])
        send(orders, "orders", f"none-{i}".encode())
        clock.advance(1)
    assert found(orders, "orders", "order-1") == [f"o1-{i}".encode() for i in reversed(range(12))]
    assert found(orders, "orders", "extra-3") == [b"o1-3"]
    assert found(orders, "orders", "absent") == []
    queues = {m.queue for m in orders.key_lookup.find("orders", "order-1", limit=12).messages}
    assert len(queues) > 1


def test_one_batch_with_several_matches_pages_through_them_in_offset_order(orders):
    orders.produce.send("orders", [MessageInput(b"%d" % i, keys=("k",)) for i in range(7)])
    page = orders.key_lookup.find("orders", "k", limit=3)
    assert [m.body for m in page.messages] == [b"6", b"5", b"4"]
    assert found(orders, "orders", "k", limit=3) == [b"%d" % i for i in reversed(range(7))]


def test_pages_have_no_duplicates_nor_gaps_while_new_messages_arrive(orders, clock):
    for i in range(30):
        send(orders, "orders", b"old-%02d" % i, keys=["k"])
        clock.advance(0.5)
    seen, token = [], None
    for round_ in range(100):
        page = orders.key_lookup.find("orders", "k", limit=4, page_token=token)
        seen += [m.body for m in page.messages]
        clock.advance(0.5)
        send(orders, "orders", b"new-%02d" % round_, keys=["k"])
        token = page.next_token
        if token is None:
            break
    assert seen == [b"old-%02d" % i for i in reversed(range(30))]


def test_a_page_stops_at_its_object_budget_and_the_next_goes_on(orders, clock, monkeypatch):
    monkeypatch.setattr(key_lookup, "MAX_OBJECT_READS", 2)
    for i in range(6):
        send(orders, "orders", b"%d" % i, keys=["k"])
        clock.advance(1)
    first = orders.key_lookup.find("orders", "k", limit=100)
    assert len(first.messages) < 6 and first.next_token is not None
    assert found(orders, "orders", "k") == [b"%d" % i for i in reversed(range(6))]


def test_the_window_bounds_the_stored_time(orders, clock):
    start = clock.now
    for i in range(5):
        send(orders, "orders", b"%d" % i, keys=["k"])
        clock.advance(10)
    window = {"begin_ms": start + 10_000, "end_ms": start + 30_000}
    assert found(orders, "orders", "k", **window) == [b"3", b"2", b"1"]
    assert found(orders, "orders", "k", begin_ms=start + 40_000) == [b"4"]
    assert found(orders, "orders", "k", end_ms=start) == [b"0"]
    with pytest.raises(InvalidRequest):
        orders.key_lookup.find("orders", "k", begin_ms=start + 1, end_ms=start)


def test_only_objects_whose_filter_may_hold_the_key_are_read(orders, clock):
    for i in range(40):
        send(orders, "orders", b"x", keys=[f"other-{i}"])
    send(orders, "orders", b"hit", keys=["wanted"])
    gets: list[str] = []
    remove = observe_calls(lambda service, op, _p: gets.append(op) if op == "GetObject" else None)
    try:
        fresh = type(orders)(orders.settings, clock)  # an empty batch cache
        assert [m.body for m in fresh.key_lookup.find("orders", "wanted").messages] == [b"hit"]
    finally:
        remove()
    assert 1 <= len(gets) <= 3  # the match, and false positives at ~1 % of 40 batches


def test_index_items_without_a_filter_are_read_so_nothing_is_missed(orders):
    send(orders, "orders", b"old", keys=["k"])
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = orders.settings.log_index_table
    for item in ddb.scan(TableName=table)["Items"]:
        key = {"stream": item["stream"], "base_offset": item["base_offset"]}
        ddb.update_item(TableName=table, Key=key, UpdateExpression="REMOVE key_filter")
    assert found(orders, "orders", "k") == [b"old"]


def test_nothing_is_written_per_message_and_the_append_is_unchanged(orders):
    calls: list[str] = []
    remove = observe_calls(lambda service, op, _p: calls.append(f"{service}.{op}"))
    try:
        orders.produce.send("orders", [MessageInput(b"%d" % i, keys=("k",)) for i in range(50)])
    finally:
        remove()
    assert sorted(c for c in calls if c != "dynamodb.GetItem") == [
        "dynamodb.PutItem",
        "dynamodb.UpdateItem",
        "s3.PutObject",
    ]


def test_messages_past_retention_are_not_found(broker, clock):
    broker.admin.create_topic("short", queues=1, retention_hours=1)
    send(broker, "short", b"gone", keys=["k"])
    clock.advance(3601)
    send(broker, "short", b"kept", keys=["k"])
    assert found(broker, "short", "k", begin_ms=0) == [b"kept"]


def test_bad_input_is_refused(orders):
    with pytest.raises(InvalidMessage):
        orders.key_lookup.find("orders", "")
    with pytest.raises(InvalidRequest):
        orders.key_lookup.find("orders", "k", limit=0)
    for window in ({"begin_ms": -1}, {"end_ms": 10**40}, {"begin_ms": 10**20}):
        with pytest.raises(InvalidTimestamp):
            orders.key_lookup.find("orders", "k", **window)
    with pytest.raises(TopicNotFound):
        orders.key_lookup.find("nope", "k")
    with pytest.raises(InvalidPageToken):
        orders.key_lookup.find("orders", "k", page_token="not-a-token")
    send(orders, "orders", b"a", keys=["k"])
    send(orders, "orders", b"b", keys=["k"])
    token = orders.key_lookup.find("orders", "k", limit=1).next_token
    with pytest.raises(InvalidPageToken):
        orders.key_lookup.find("orders", "other", page_token=token)
    fields = json.loads(base64.urlsafe_b64decode(token))
    forged = base64.urlsafe_b64encode(json.dumps({**fields, "b": 10**40}).encode()).decode()
    with pytest.raises(InvalidPageToken):
        orders.key_lookup.find("orders", "k", page_token=forged)
    infinite = json.dumps({**fields, "a": [float("inf"), 0, 0]})  # JSON's Infinity
    with pytest.raises(InvalidPageToken):
        orders.key_lookup.find(
            "orders", "k", page_token=base64.urlsafe_b64encode(infinite.encode()).decode()
        )


def test_retries_and_dead_letters_are_found_on_their_own_topics(broker, clock):
    broker.admin.create_topic("jobs", queues=1)
    broker.retries.set_max_delivery_attempts("g", 2)
    send(broker, "jobs", b"poison", keys=["job-7"])
    got = broker.consume.receive("g", "jobs", max_messages=10)
    broker.retries.nack("g", [m.receipt_handle for m in got])
    assert found(broker, "retry.g.jobs", "job-7") == [b"poison"]
    clock.advance(60)
    got = broker.consume.receive("g", "jobs", max_messages=10)
    assert [m.message.body for m in got] == [b"poison"]
    broker.retries.nack("g", [m.receipt_handle for m in got])
    assert found(broker, "dlq.g", "job-7") == [b"poison"]
    assert found(broker, "jobs", "job-7") == [b"poison"]
    with pytest.raises(InvalidRequest):
        broker.key_lookup.find("no.such.kind", "job-7")


def test_uncommitted_and_rolled_back_transaction_messages_are_not_found(settings, clock):
    import dataclasses

    from cirrusmq_broker.container import Broker

    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    b = Broker(dataclasses.replace(settings, transactions_table=table), clock)
    b.admin.create_topic("pay", queues=2, message_type="TRANSACTION")
    b.transactions.register("pg", "p1")

    def half(txid: str, body: bytes) -> None:
        b.transactions.send(
            "pg",
            txid,
            transactional_id="p1",
            epoch=1,
            topic_name="pay",
            inputs=[MessageInput(body, keys=("pay-1",))],
            part=0,
        )

    half("tx1", b"committed")
    half("tx2", b"rolled-back")
    half("tx3", b"open")
    assert found(b, "pay", "pay-1") == []
    b.transactions.end("pg", "tx1", Resolution.COMMIT, producer=("p1", 1))
    b.transactions.end("pg", "tx2", Resolution.ROLLBACK, producer=("p1", 1))
    assert found(b, "pay", "pay-1") == [b"committed"]


def test_batches_stored_in_one_millisecond_across_index_pages_are_each_found_once(
    orders, clock, monkeypatch
):
    monkeypatch.setattr(key_lookup, "INDEX_PAGE_ITEMS", 2)
    for i in range(9):
        send(orders, "orders", b"%d" % i, keys=["k"])
        if i % 3 == 2:
            clock.advance(1)
    bodies = found(orders, "orders", "k", limit=2)
    assert sorted(bodies) == [b"%d" % i for i in range(9)]
    assert [sorted(bodies[i : i + 3]) for i in (0, 3, 6)] == [
        [b"6", b"7", b"8"],
        [b"3", b"4", b"5"],
        [b"0", b"1", b"2"],
    ]


def test_a_window_that_starts_after_it_ends_finds_nothing_without_a_query(orders, clock):
    """DynamoDB refuses a BETWEEN whose lower bound is above its upper one (moto does not)."""
    send(orders, "orders", b"a", keys=["k"])
    queries: list[str] = []
    remove = observe_calls(lambda service, op, _p: queries.append(op) if op == "Query" else None)
    try:
        assert found(orders, "orders", "k", begin_ms=clock.now + 60_000) == []
    finally:
        remove()
    assert queries == []


def test_a_page_reads_at_most_its_object_budget_whatever_the_queues(orders, clock, monkeypatch):
    """Each queue's stream is primed by the merge before any is consumed: an object read
    there would escape the budget (64 queues, 64 reads against a cap of 32)."""
    monkeypatch.setattr(key_lookup, "MAX_OBJECT_READS", 2)
    for i in range(12):
        send(orders, "orders", b"%d" % i, keys=["k"])
        clock.advance(1)
    fresh = type(orders)(orders.settings, clock)  # an empty batch cache
    assert len(found(fresh, "orders", "k")) == 12
    fresh = type(orders)(orders.settings, clock)
    gets: list[str] = []
    remove = observe_calls(lambda service, op, _p: gets.append(op) if op == "GetObject" else None)
    try:
        fresh.key_lookup.find("orders", "k", limit=100)
    finally:
        remove()
    assert len(gets) <= 2


def test_a_page_reads_at_most_its_index_budget_whatever_the_queues(orders, clock, monkeypatch):
    """Priming the merge reads one index page per queue: 200 items each, 64 queues, 12,800
    items against a cap of 2,000. The first page per queue shares the budget out."""
    monkeypatch.setattr(key_lookup, "MAX_INDEX_ITEMS", 8)
    for i in range(24):
        send(orders, "orders", b"%d" % i, keys=["other"])
        clock.advance(1)
    read: list[int] = []
    index = orders.key_lookup._index
    original = index.stored_newest_first

    def counted(*args, **kwargs):
        page, start = original(*args, **kwargs)
        read.append(len(page))
        return page, start

    monkeypatch.setattr(index, "stored_newest_first", counted)
    orders.key_lookup.find("orders", "k", limit=100)
    assert sum(read) <= 8
    monkeypatch.setattr(index, "stored_newest_first", original)
    assert found(orders, "orders", "k") == []
