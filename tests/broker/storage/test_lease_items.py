"""Leases stored one item each: write units that do not grow with what is in flight, and
the races and edges of the layout (acks racing redelivery, stale bounds, moved messages)."""

from __future__ import annotations

import collections
import math
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import boto3
import pytest
from broker_helpers import ack_statuses, create_fifo_topic, send, statuses
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import ReplayedRequest
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.services.moves import MoveAppender
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.dynamo import batch_write, to_item
from cirrusmq_broker.storage.groups import codec, keys

INDEXED = "topic"
"""The by_topic index's key: an item carrying it is written to the index too."""


# ---------------------------------------------------------------- DynamoDB's sizing rules
def value_size(value: dict[str, Any]) -> int:
    """Bytes of one attribute value as DynamoDB bills it."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = Decimal(raw).normalize().as_tuple().digits
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode()) for x in raw)
    if kind == "NS":
        return sum(value_size({"N": x}) for x in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    raise ValueError(kind)


def item_size(item: dict[str, Any] | None) -> int:
    """Attribute names plus values; 0 for no item."""
    return sum(len(k.encode()) + value_size(v) for k, v in (item or {}).items())


def write_units(before: dict | None, after: dict | None, *, transaction: bool) -> int:
    """A write is billed on the larger of the item before and after, per started KB;
    twice inside a transaction; plus one unit when an index entry is added or removed."""
    units = math.ceil(max(item_size(before), item_size(after), 1) / 1024)
    indexed = (INDEXED in (before or {})) != (INDEXED in (after or {}))
    return units * (2 if transaction else 1) + int(indexed)


def key_of(item: dict[str, Any]) -> tuple[str, str]:
    return item["group_name"]["S"], item["stream"]["S"]


@contextmanager
def metered(broker: Broker) -> Iterator[dict[str, Any]]:
    """Write units of the group table's writes inside the block (from item sizes)."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = broker.settings.groups_table

    def snapshot() -> dict[tuple[str, str], dict]:
        pages = ddb.get_paginator("scan").paginate(TableName=table)
        return {key_of(item): item for page in pages for item in page["Items"]}

    writes: list[tuple[tuple[str, str], bool]] = []
    calls: list[str] = []

    def observe(service: str, operation: str, params: dict[str, Any]) -> None:
        if params.get("TableName") == table or operation in (
            "BatchGetItem",
            "BatchWriteItem",
            "TransactWriteItems",
        ):
            calls.append(operation)  # the group table's calls (and batched ones)
        if operation in ("PutItem", "UpdateItem", "DeleteItem") and params["TableName"] == table:
            writes.append((key_of(params.get("Item") or params["Key"]), False))
        elif operation == "TransactWriteItems":
            for entry in params["TransactItems"]:
                (body,) = entry.values()
                if body["TableName"] == table:
                    writes.append((key_of(body.get("Item") or body["Key"]), True))
        elif operation == "BatchWriteItem":
            for request in params["RequestItems"].get(table, []):
                (body,) = request.values()
                writes.append((key_of(body.get("Item") or body["Key"]), False))

    result: dict[str, Any] = {}
    before = snapshot()
    remove = observe_calls(observe)
    try:
        yield result
    finally:
        remove()
    after = snapshot()
    result["calls"] = sorted(calls)
    result["wcu"] = sum(write_units(before.get(k), after.get(k), transaction=t) for k, t in writes)
    result["largest"] = max(
        (item_size(after.get(k) or before.get(k)) for k, _ in writes), default=0
    )


def seed_single_leases(broker: Broker, group: str, topic: str, count: int, now: int) -> None:
    """``count`` single-message leases on queue 0, written as receives would have."""
    store = broker.states
    state = store.load_one(group, topic, 0)
    for offset in range(count):
        state.lease_new(
            offset + 1,
            delivered=[offset],
            cursor_base=offset + 1 - (offset + 1) % 1000,
            now=now,
            invisible_ms=600_000,
        )
    items = [to_item(codec.summary_values(state, version=1))]
    items += [
        to_item(codec.lease_values(state, codec.replace_version(lease, None)))
        for lease in state.leases.values()
    ]
    for start in range(0, len(items), 25):
        chunk = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        batch_write(boto3.client("dynamodb", region_name="us-east-1"), store.table, chunk)


def measure(broker: Broker, group: str, topic: str) -> tuple[dict, dict]:
    """Write units of receiving the next message and of acking it."""
    with metered(broker) as receive:
        [message] = broker.consume.receive(group, topic, max_messages=1)
    with metered(broker) as ack:
        assert ack_statuses(broker, group, [message.receipt_handle]) == ["acked"]
    return receive, ack


def test_write_units_of_a_receive_and_an_ack_do_not_grow_with_leases_in_flight(broker, clock):
    in_flight = 1999  # the receive measured makes it 2,000, the ack acks with 2,000 open
    for topic in ("a", "b"):
        broker.admin.create_topic(topic, queues=1)
    broker.consume.subscribe("ga", "a", "*")
    broker.consume.subscribe("gb", "b", "*")
    send(broker, "a", b"first", b"m")
    measure(broker, "ga", "a")  # the group's first receive on the queue stores its summary
    quiet_receive, quiet_ack = measure(broker, "ga", "a")

    for _ in range(2):
        broker.produce.send("b", [MessageInput(b"m")] * 1000)
    seed_single_leases(broker, "gb", "b", in_flight, clock())
    assert statuses(broker, "gb")[0].inflight == in_flight
    busy_receive, busy_ack = measure(broker, "gb", "b")
    [status] = statuses(broker, "gb")
    assert (status.inflight, status.committed_offset) == (in_flight, 0)

    assert busy_receive["wcu"] == quiet_receive["wcu"]
    assert busy_ack["wcu"] == quiet_ack["wcu"]
    assert busy_receive["largest"] < 1024 and busy_ack["largest"] < 1024
    assert busy_receive["calls"] == quiet_receive["calls"] == ["BatchGetItem", "UpdateItem"]
    # the whole lease (stored on the summary): one conditional removal
    assert busy_ack["calls"] == quiet_ack["calls"] == ["UpdateItem"]
    print(
        f"\nreceive: {quiet_receive['wcu']} WCU with 0 in flight, {busy_receive['wcu']} with"
        f" {in_flight}; ack: {quiet_ack['wcu']} WCU with 1, {busy_ack['wcu']} with 2000;"
        f" largest item written {busy_receive['largest']} B"
    )


def test_the_old_handle_of_a_moved_message_acks_it_for_good(broker, clock):
    create_fifo_topic(broker, "t")  # an expired lease is redelivered in place
    send(broker, "t", b"x", b"y", message_group="k")
    x, y = broker.consume.receive("g", "t", invisible_seconds=10)
    broker.consume.change_invisible("g", x.receipt_handle, 100)
    assert ack_statuses(broker, "g", [x.receipt_handle]) == ["acked"]  # the old handle
    clock.advance(101)
    again = broker.consume.receive("g", "t", invisible_seconds=10)
    assert [m.message.body for m in again] == [b"y"]
    assert ack_statuses(broker, "g", [again[0].receipt_handle, y.receipt_handle]) == [
        "acked",
        "expired",  # redelivered since: its redelivery's handle settled it, not this one
    ]
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (2, 0)


def test_an_ack_racing_a_redelivery_is_not_lost(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(11)
    original = MoveAppender.append
    outcome: list[str] = []

    def ack_first(self, *args, **kwargs):
        if not outcome:  # the consumer acks just after the expiry read the lease
            outcome.extend(ack_statuses(broker, "g", [m.receipt_handle]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", ack_first)
    assert broker.consume.receive("g", "t", invisible_seconds=10) == []
    assert outcome == ["acked"]
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (1, 0)


def test_a_stale_deadline_bound_costs_one_query_then_polls_are_idle(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    [x] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    [y] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.groups_table)["Items"]
    assert sum("#L" in key_of(i)[1] for i in items) == 1  # x's lease is on the summary
    ack_statuses(broker, "g", [x.receipt_handle, y.receipt_handle])
    clock.advance(11)  # the bound says a lease may have expired: the acked ones
    with metered(broker) as first:
        assert broker.consume.receive("g", "t") == []
    # the retry topic's absence read consistently, then the exact bounds stored: y's lease
    # was an item of its own, which an ack deletes without counting it out of the summary
    assert first["calls"] == ["BatchGetItem", "GetItem", "Query", "UpdateItem"]
    with metered(broker) as second:
        assert broker.consume.receive("g", "t") == []
    assert second["calls"] == ["BatchGetItem"]


def test_the_ack_of_the_summarys_lease_leaves_no_bound_to_check(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    ack_statuses(broker, "g", [m.receipt_handle])  # the lease stored on the summary
    clock.advance(11)  # its deadline passed, but the ack counted it out: no lease query
    with metered(broker) as first:
        assert broker.consume.receive("g", "t") == []
    assert first["calls"] == ["BatchGetItem", "GetItem", "UpdateItem"]
    with metered(broker) as second:
        assert broker.consume.receive("g", "t") == []
    assert second["calls"] == ["BatchGetItem"]


def test_a_stale_handle_of_a_split_lease_is_expired_and_a_settled_one_acked(broker, clock):
    create_fifo_topic(broker, "t")  # an expired lease is redelivered in place
    send(broker, "t", b"a", b"b", b"c", message_group="k")
    a, b, c = broker.consume.receive("g", "t", invisible_seconds=10)
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]
    clock.advance(11)
    [again] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    assert again.message.body == b"a"  # the lease was split: c stays in a lease of its own
    assert ack_statuses(broker, "g", [a.receipt_handle, b.receipt_handle, c.receipt_handle]) == [
        "expired",
        "acked",
        "expired",
    ]


def test_purging_a_topic_deletes_its_leases(broker, clock):
    broker.admin.create_topic("t", queues=2)
    broker.admin.create_topic("keep", queues=1)
    send(broker, "t", b"x", b"y")
    send(broker, "keep", b"z")
    assert broker.consume.receive("g", "t") and broker.consume.receive("g", "keep")
    broker.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    broker.janitor.purge_deleted_topics()
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    left = [key_of(i)[1] for i in ddb.scan(TableName=broker.settings.groups_table)["Items"]]
    assert left and all(stream.startswith("keep#") for stream in left)


# ------------------------------------------------ an ack of a whole lease: one delete
def test_an_ack_of_everything_a_lease_delivered_is_one_small_conditional_delete(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"m" * 100)] * 1000)
    received = broker.consume.receive("g", "t", max_messages=1000)
    assert len(received) == 1000
    with metered(broker) as ack:
        statuses_ = ack_statuses(broker, "g", [m.receipt_handle for m in received])
    assert statuses_ == ["acked"] * 1000
    assert (ack["calls"], ack["wcu"]) == (["DeleteItem"], 1)  # was an ADD of 1,000 + a delete
    assert broker.consume.receive("g", "t") == []
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (1000, 0)
    with metered(broker) as duplicate:  # a retried ack: the failed delete says it is gone
        again = ack_statuses(broker, "g", [m.receipt_handle for m in received])
    assert again == ["acked"] * 1000  # acking it again still succeeds (no lease left)
    assert duplicate["calls"].count("DeleteItem") == 1 and "UpdateItem" not in duplicate["calls"]
    assert len(duplicate["calls"]) <= 5, duplicate["calls"]  # not a read per handle


def test_a_filtered_lease_is_settled_whole_by_acking_what_it_delivered(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"x", tag=tag) for tag in "abab"])
    received = broker.consume.receive("g", "t", filter_expression="a", max_messages=10)
    assert [m.message.offset for m in received] == [0, 2]
    with metered(broker) as ack:
        assert ack_statuses(broker, "g", [m.receipt_handle for m in received]) == ["acked"] * 2
    assert ack["calls"] == ["UpdateItem"]
    assert broker.consume.receive("g", "t", filter_expression="a") == []
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (4, 0)


def test_partial_acks_take_the_settle_path_and_lose_nothing(broker, clock):
    create_fifo_topic(broker, "t")  # an expired lease is redelivered in place
    send(broker, "t", *[bytes([65 + i]) for i in range(6)], message_group="k")
    received = broker.consume.receive("g", "t", max_messages=6, invisible_seconds=10)
    with metered(broker) as first:  # 2 of 6: an ADD, the lease stays
        assert ack_statuses(broker, "g", [m.receipt_handle for m in received[:2]]) == ["acked"] * 2
    assert first["calls"] == ["UpdateItem"]
    with metered(broker) as duplicate_subset:  # 2 of 6 again: still not the whole lease
        assert ack_statuses(broker, "g", [m.receipt_handle for m in received[:2]]) == ["acked"] * 2
    assert duplicate_subset["calls"] == ["UpdateItem"]
    assert ack_statuses(broker, "g", [m.receipt_handle for m in received[2:5]]) == ["acked"] * 3
    clock.advance(11)
    [left] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert left.message.body == b"F"  # the one never acked comes back, nothing else
    assert ack_statuses(broker, "g", [left.receipt_handle]) == ["acked"]
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []


def test_an_ack_of_a_lease_with_a_moved_message_falls_back_and_settles_both(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y", b"z")
    x, y, z = broker.consume.receive("g", "t", invisible_seconds=10)
    broker.consume.change_invisible("g", y.receipt_handle, 100)  # y moves to a lease of its own
    with metered(broker) as ack:
        handles = [x.receipt_handle, y.receipt_handle, z.receipt_handle]
        assert ack_statuses(broker, "g", handles) == ["acked"] * 3
    assert ack["calls"] == ["TransactWriteItems", "UpdateItem", "UpdateItem"]  # refused fast
    clock.advance(101)  # path, an ADD, then the settled lease and y's own removed in one call,
    # each conditional on what the ADD returned (a batch write cannot carry conditions)
    assert broker.consume.receive("g", "t") == []
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (3, 0)


def test_after_a_partial_redelivery_each_lease_is_settled_by_its_own_handles(broker, clock):
    create_fifo_topic(broker, "t")  # an expired lease is redelivered in place
    send(broker, "t", *[bytes([65 + i]) for i in range(5)], message_group="k")
    first = broker.consume.receive("g", "t", max_messages=5, invisible_seconds=10)
    clock.advance(11)
    taken = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    assert [m.message.body for m in taken] == [b"A", b"B"]
    with metered(broker) as sorting:
        stale = ack_statuses(broker, "g", [m.receipt_handle for m in first])
    assert stale == ["expired"] * 5  # a whole-lease ack of the old id deletes nothing
    assert sorting["calls"].count("Query") <= 2  # the leases around them: not one per handle
    assert ack_statuses(broker, "g", [m.receipt_handle for m in taken]) == ["acked"] * 2
    clock.advance(11)
    rest = broker.consume.receive("g", "t", max_messages=5, invisible_seconds=10)
    assert [m.message.body for m in rest] == [b"C", b"D", b"E"]
    assert ack_statuses(broker, "g", [m.receipt_handle for m in rest]) == ["acked"] * 3
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []


def test_a_late_ack_of_a_lease_moved_to_the_retry_topic_reads_per_lease_not_per_handle(
    broker, clock
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", *[bytes([65 + i % 26]) for i in range(40)])
    got = broker.consume.receive("g", "t", max_messages=40, invisible_seconds=10)
    early = ack_statuses(broker, "g", [got[0].receipt_handle])  # acked before the expiry
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []  # expiry moves the other 39 on (backoff)
    calls: collections.Counter[str] = collections.Counter()
    stop = observe_calls(lambda service, operation, _: calls.update([operation]))
    try:
        late = ack_statuses(broker, "g", [m.receipt_handle for m in got])
    finally:
        stop()
    assert early == ["acked"]
    assert late == ["acked"] + ["expired"] * 39  # moved on: they come back from retries
    assert sum(calls.values()) <= 12, calls  # was ~4 calls per handle


def test_a_partial_ack_runs_the_claim_before_it_writes(broker, clock):
    """The API claims the request's nonce there: a replayed partial ack is refused instead
    of rewriting the lease (and racing the group's other writes) for 300 s."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", *[bytes([65 + i]) for i in range(5)])
    got = broker.consume.receive("g", "t", max_messages=5, invisible_seconds=300)
    claims: list[str] = []

    def claim() -> None:
        claims.append("claimed")
        if len(claims) > 1:
            raise ReplayedRequest("seen")

    partial = [m.receipt_handle for m in got[:2]]
    assert [o.status for o in broker.consume.ack("g", partial, before_slow_path=claim)] == [
        "acked",
        "acked",
    ]
    with metered(broker) as replay, pytest.raises(ReplayedRequest):
        broker.consume.ack("g", partial, before_slow_path=claim)
    assert replay["calls"] == []  # refused before any write
    whole = [m.receipt_handle for m in got]
    del claims[:]
    statuses_ = [o.status for o in broker.consume.ack("g", whole, before_slow_path=claim)]
    assert statuses_ == ["acked"] * 5 and claims == []  # every delivery: the whole lease


def ack_calls(broker, clock, group: str, singles: int) -> int:
    """AWS calls of one ack through the parent's handles of ``singles`` messages each split
    off (change_invisible) and acked through its own handle before (a resent ack)."""
    from broker_helpers import send as send_
    from cirrusmq_broker.storage.clients import observe_calls

    topic = f"t{singles}"
    broker.admin.create_topic(topic, queues=1)
    send_(broker, topic, *[b"m%d" % i for i in range(singles + 1)])
    got = broker.consume.receive(group, topic, max_messages=singles + 1, invisible_seconds=100)
    assert len(got) == singles + 1
    for m in got[:singles]:
        changed = broker.consume.change_invisible(group, m.receipt_handle, 60)
        assert ack_statuses(broker, group, [changed.receipt_handle]) == ["acked"]
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(operation))
    try:
        answer = ack_statuses(broker, group, [m.receipt_handle for m in got])
    finally:
        remove()
    assert answer == ["acked"] * (singles + 1)
    print(f"\n{singles} split-off messages: {len(seen)} calls {sorted(set(seen))}")
    return len(seen)


def test_an_ack_through_parent_handles_costs_no_call_per_split_off_message(broker, clock):
    assert ack_calls(broker, clock, "g", 10) == ack_calls(broker, clock, "g", 2)


def test_an_ack_through_parent_handles_tells_a_redelivered_split_off_message_from_an_acked_one(
    broker, clock
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y", b"z", b"w")
    x, y, z, w = broker.consume.receive("g", "t", max_messages=4, invisible_seconds=100)
    for m in (x, y):
        broker.consume.change_invisible("g", m.receipt_handle, 60)  # each a lease of its own
    [changed] = [broker.consume.change_invisible("g", z.receipt_handle, 60)]
    assert ack_statuses(broker, "g", [changed.receipt_handle]) == ["acked"]  # z: gone
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    key = to_item({"group_name": "g", "stream": keys.lease_stream("t", 0, (1, True))})
    ddb.update_item(  # y's lease of its own now has another id, as after a redelivery
        TableName=broker.settings.groups_table,
        Key=key,
        UpdateExpression="SET lease_id = :id",
        ExpressionAttributeValues=to_item({":id": "1m.0123456789abn1"}),
    )
    handles = [x.receipt_handle, y.receipt_handle, z.receipt_handle, w.receipt_handle]
    assert ack_statuses(broker, "g", handles) == ["acked", "expired", "acked", "acked"]
