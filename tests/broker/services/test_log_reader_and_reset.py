"""Reads by offset, queue offsets, offset for a timestamp and group offset reset, on
in-process moto with a fake clock; the Spark data source's planning over the same log."""

from __future__ import annotations

import pickle
import time

import boto3
import pytest
from botocore.exceptions import ClientError
from broker_helpers import ack_statuses, send
from cirrusmq.spark.options import StackOptions
from cirrusmq.spark.planning import QueueLog
from cirrusmq_broker.errors import (
    InvalidFilterExpression,
    InvalidOffset,
    InvalidRequest,
    InvalidTimestamp,
    QueueNotFound,
    StorageUnavailable,
    TopicNotFound,
)
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services import log_reader, offset_reset
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage import group_offsets
from cirrusmq_broker.storage.groups.keys import lease_prefix, summary_stream


def batches(broker, topic: str, *sizes: int, clock=None, step_s: float = 10, **fields) -> list:
    """Send one batch per size (bodies 'o<offset>'), moving the clock ``step_s`` after each."""
    stamps = []
    offset = broker.log_reader.offsets(topic, queue=0)[0].max_offset
    for size in sizes:
        stamps.append(broker.clock())
        bodies = [f"o{offset + i}".encode() for i in range(size)]
        broker.produce.send(topic, [MessageInput(b, **fields) for b in bodies])
        offset += size
        if clock is not None:
            clock.advance(step_s)
    return stamps


def bodies(messages) -> list[str]:
    return [m.body.decode() for m in messages]


def lease_items(broker, group: str, topic: str, queue: int = 0) -> list:
    """The stored leases of the queue: its lease items, and the summary if one is on it."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.groups_table)["Items"]
    prefix = lease_prefix(topic, queue)
    return [
        i
        for i in items
        if i["group_name"]["S"] == group
        and (
            i["stream"]["S"].startswith(prefix)
            or (i["stream"]["S"] == summary_stream(topic, queue) and "l_lease_id" in i)
        )
    ]


# ---------------------------------------------------------------------------- reads
def test_read_from_any_offset_including_inside_a_batch(broker, clock):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 5, 5, 5)
    first = broker.log_reader.read("t", 0, 0, max_messages=3)
    assert bodies(first.messages) == ["o0", "o1", "o2"]
    assert (first.next_offset, first.max_offset, first.truncated) == (3, 15, False)
    middle = broker.log_reader.read("t", 0, 3, max_messages=6)
    assert bodies(middle.messages) == [f"o{i}" for i in range(3, 9)]
    assert middle.next_offset == 9
    rest = broker.log_reader.read("t", 0, 9, max_messages=100)
    assert bodies(rest.messages) == [f"o{i}" for i in range(9, 15)] and rest.next_offset == 15
    end = broker.log_reader.read("t", 0, 15)
    assert end.messages == [] and end.next_offset == 15


def test_a_filter_skips_messages_and_the_next_offset_passes_them(broker):
    broker.admin.create_topic("t", queues=1)
    for tag in ["A", "B", "A", "C"]:
        send(broker, "t", tag.encode(), tag=tag)
    result = broker.log_reader.read("t", 0, 0, filter_expression="B || C", max_messages=1)
    assert bodies(result.messages) == ["B"] and result.next_offset == 2
    result = broker.log_reader.read("t", 0, 2, filter_expression="B || C")
    assert bodies(result.messages) == ["C"] and result.next_offset == 4
    only_a = broker.log_reader.read("t", 0, 3, filter_expression="A")
    assert only_a.messages == [] and only_a.next_offset == 4


def test_a_read_below_retention_starts_at_the_earliest_retained_and_says_so(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    batches(broker, "t", 4, 3)
    clock.advance(2 * 3600)
    batches(broker, "t", 2)
    result = broker.log_reader.read("t", 0, 1)
    assert result.truncated and (result.requested_offset, result.start_offset) == (1, 7)
    assert bodies(result.messages) == ["o7", "o8"] and result.next_offset == 9
    (info,) = broker.log_reader.offsets("t")
    assert (info.min_offset, info.max_offset) == (7, 9)


def test_bad_reads_are_refused(broker):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"x", message_group="g")
    with pytest.raises(InvalidOffset):
        broker.log_reader.read("t", 0, -1)
    with pytest.raises(InvalidOffset) as beyond:
        broker.log_reader.read("t", 0, 5)
    assert beyond.value.details == {"max_offset": broker.log_reader.offsets("t")[0].max_offset}
    with pytest.raises(QueueNotFound):
        broker.log_reader.read("t", 2, 0)
    with pytest.raises(TopicNotFound):
        broker.log_reader.read("nope", 0, 0)
    with pytest.raises(InvalidFilterExpression):
        broker.log_reader.read("t", 0, 0, filter_expression="A ||")
    with pytest.raises(InvalidRequest):
        broker.log_reader.read("t", 0, 0, max_messages=0)
    with pytest.raises(InvalidRequest):
        broker.log_reader.read("t", 0, 0, wait_seconds=21)


def test_an_idle_long_poll_reads_only_the_head_about_once_a_second(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(log_reader.time, "monotonic", lambda: now[0])
    reader = log_reader.LogReader(  # the container's reader, sleeping on the fake time
        topics=broker.catalog,
        index=broker.index,
        heads=broker.heads,
        reader=broker.reader,
        clock=broker.clock,
        sleep=sleep,
    )
    heads = []
    real_get = broker.heads.get
    monkeypatch.setattr(broker.heads, "get", lambda *a: heads.append(a) or real_get(*a))
    result = reader.read("t", 0, 0, wait_seconds=3)
    assert result.messages == [] and result.next_offset == 0
    assert slept and all(s <= 1.0 for s in slept) and len(heads) == len(slept) + 1 <= 4


# ---------------------------------------------------------------------------- timestamps
def test_offset_for_a_timestamp_is_exact_per_message_from_the_index(broker, clock):
    broker.admin.create_topic("t", queues=1)
    t0, t1, t2 = batches(broker, "t", 3, 4, 2, clock=clock)
    at = {
        ts: broker.log_reader.offsets("t", timestamp_ms=ts)[0].timestamp_offset
        for ts in (t0 - 1, t0, t1 - 1, t1, t1 + 1, t2, t2 + 1)
    }
    assert at == {t0 - 1: 0, t0: 0, t1 - 1: 3, t1: 3, t1 + 1: 7, t2: 7, t2 + 1: 9}
    with pytest.raises(InvalidTimestamp):
        broker.log_reader.offsets("t", timestamp_ms=-1)
    with pytest.raises(InvalidTimestamp):
        broker.log_reader.offsets("t", timestamp_ms=10**16)


def test_timestamp_search_reads_no_object(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    _, t1 = batches(broker, "t", 3, 3, clock=clock)
    monkeypatch.setattr(broker.reader, "messages", lambda entry: pytest.fail("object read"))
    assert broker.log_reader.offsets("t", timestamp_ms=t1)[0].timestamp_offset == 3


# ---------------------------------------------------------------------------- reset
def test_rewind_by_timestamp_redelivers_exactly_the_messages_at_or_after_it(broker, clock):
    broker.admin.create_topic("t", queues=1)
    _, t1, _ = batches(broker, "t", 3, 4, 2, clock=clock)
    got = broker.consume.receive("g", "t", max_messages=100)
    assert len(got) == 9
    ack_statuses(broker, "g", [r.receipt_handle for r in got])
    result = broker.offset_reset.reset("g", "t", "timestamp", timestamp_ms=t1)
    (queue,) = result.queues
    assert (queue.offset, queue.previous_cursor, queue.truncated) == (3, 9, False)
    again = broker.consume.receive("g", "t", max_messages=100)
    assert bodies(r.message for r in again) == [f"o{i}" for i in range(3, 9)]


def test_reset_drops_open_leases_and_their_handles_go_stale(broker):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 5)
    held = broker.consume.receive("g", "t", max_messages=2)
    assert lease_items(broker, "g", "t")
    result = broker.offset_reset.reset("g", "t", "earliest")
    assert result.queues[0].dropped_leases == 1 and result.queues[0].offset == 0
    assert lease_items(broker, "g", "t") == []
    assert set(ack_statuses(broker, "g", [r.receipt_handle for r in held])) == {"expired"}
    again = broker.consume.receive("g", "t", max_messages=100)
    assert bodies(r.message for r in again) == [f"o{i}" for i in range(5)]
    (status,) = broker.consume.describe_group("g").queues
    assert (status.cursor, status.inflight) == (5, 5)


def test_reset_to_earliest_after_retention_starts_at_the_earliest_retained(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    batches(broker, "t", 4)
    clock.advance(2 * 3600)
    batches(broker, "t", 3)
    result = broker.offset_reset.reset("g", "t", "earliest")
    (queue,) = result.queues
    assert (queue.offset, queue.min_offset, queue.truncated) == (4, 4, True)
    assert "queue 0 at 4" in (result.note() or "")
    got = broker.consume.receive("g", "t", max_messages=100)
    assert bodies(r.message for r in got) == ["o4", "o5", "o6"]


def test_reset_to_latest_and_to_an_offset_per_queue(broker):
    broker.admin.create_topic("t", queues=2)
    for key in ("a", "b"):
        send(broker, "t", b"1", b"2", b"3", message_group=key)
    ends = {q.queue: q.max_offset for q in broker.log_reader.offsets("t")}
    latest = broker.offset_reset.reset("g", "t", "latest")
    assert {q.queue: q.offset for q in latest.queues} == ends
    assert broker.consume.receive("g", "t", max_messages=100) == []
    busy = max(ends, key=ends.get)
    one = broker.offset_reset.reset("g", "t", "offset", offsets={busy: ends[busy] - 1})
    assert [(q.queue, q.offset) for q in one.queues] == [(busy, ends[busy] - 1)]
    got = broker.consume.receive("g", "t", max_messages=100)
    assert [(r.message.queue, r.message.offset) for r in got] == [(busy, ends[busy] - 1)]


def test_reset_is_idempotent(broker):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 3)
    broker.consume.receive("g", "t", max_messages=1)
    first = broker.offset_reset.reset("g", "t", "offset", offsets={0: 1})
    second = broker.offset_reset.reset("g", "t", "offset", offsets={0: 1})
    assert first.queues[0].offset == second.queues[0].offset == 1
    assert second.queues[0].dropped_leases == 0
    got = broker.consume.receive("g", "t", max_messages=10)
    assert bodies(r.message for r in got) == ["o1", "o2"]


BAD_RESETS = [
    ("offset", {"offsets": {0: -1}}, InvalidOffset),
    ("offset", {"offsets": {0: 99}}, InvalidOffset),
    ("offset", {"offsets": {5: 0}}, QueueNotFound),
    ("offset", {"offsets": {}}, InvalidRequest),
    ("timestamp", {"timestamp_ms": -5}, InvalidTimestamp),
    ("timestamp", {}, InvalidRequest),
    ("earliest", {"timestamp_ms": 5}, InvalidRequest),
    ("yesterday", {}, InvalidRequest),
]


def test_bad_resets_change_nothing(broker):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"1", b"2", message_group="k")
    broker.consume.receive("g", "t", max_messages=1)
    before = broker.consume.describe_group("g").queues
    for to, options, error in BAD_RESETS:
        with pytest.raises(error):
            broker.offset_reset.reset("g", "t", to, **options)
    assert broker.consume.describe_group("g").queues == before


def test_a_queue_with_more_leases_than_one_transaction_takes_is_reset(broker, monkeypatch):
    monkeypatch.setattr(offset_reset, "LEASES_PER_TRANSACTION", 3)  # AWS: 99 + the summary
    monkeypatch.setattr(group_offsets, "LEASES_PER_TRANSACTION", 3)
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 10)
    for _ in range(8):
        broker.consume.receive("g", "t", max_messages=1)
    assert len(lease_items(broker, "g", "t")) == 8
    result = broker.offset_reset.reset("g", "t", "offset", offsets={0: 7})
    assert result.queues[0].dropped_leases == 8
    assert lease_items(broker, "g", "t") == []
    got = broker.consume.receive("g", "t", max_messages=100)
    assert [r.message.offset for r in got] == [7, 8, 9]


def test_a_reset_that_fails_part_way_changes_nothing_and_a_rerun_completes(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 4)
    held = broker.consume.receive("g", "t", max_messages=2)
    client = broker.offset_reset._writer._client
    real = client.transact_write_items

    def fail(**kwargs):
        raise StorageUnavailable("injected")

    monkeypatch.setattr(client, "transact_write_items", fail)
    before = broker.consume.describe_group("g").queues
    with pytest.raises(StorageUnavailable):
        broker.offset_reset.reset("g", "t", "earliest")
    assert broker.consume.describe_group("g").queues == before
    assert ack_statuses(broker, "g", [held[0].receipt_handle]) == ["acked"]
    monkeypatch.setattr(client, "transact_write_items", real)
    broker.offset_reset.reset("g", "t", "earliest")
    got = broker.consume.receive("g", "t", max_messages=10)
    assert bodies(r.message for r in got) == ["o0", "o1", "o2", "o3"]


def test_a_receive_racing_the_reset_makes_it_read_again(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 4)
    writer = broker.offset_reset._writer
    real = writer.reset
    raced: list[int] = []

    def racing(*args, **kwargs):
        if not raced:
            raced.append(1)
            broker.consume.receive("g", "t", max_messages=1)  # saves the summary first
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "reset", racing)
    result = broker.offset_reset.reset("g", "t", "latest")
    assert raced and result.queues[0].offset == 4 and result.queues[0].dropped_leases == 1
    assert broker.consume.receive("g", "t", max_messages=10) == []


def test_a_lease_saved_inside_a_reset_is_dropped_and_its_messages_redelivered(broker, monkeypatch):
    """A receive that saves the summary between the reset's read and its write leaves a
    lease the reset did not list: the reset must read again and drop it, so the handle is
    stale afterwards and the rewound queue is delivered whole."""
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 4)
    writer = broker.offset_reset._writer
    real = writer.reset
    raced: list = []

    def racing(*args, **kwargs):
        if not raced:
            raced.extend(broker.consume.receive("g", "t", max_messages=2))
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "reset", racing)
    result = broker.offset_reset.reset("g", "t", "earliest")
    assert len(raced) == 2 and result.queues[0].offset == 0
    assert lease_items(broker, "g", "t") == []
    assert set(ack_statuses(broker, "g", [r.receipt_handle for r in raced])) == {"expired"}
    again = broker.consume.receive("g", "t", max_messages=100)
    assert bodies(r.message for r in again) == ["o0", "o1", "o2", "o3"]
    (status,) = broker.consume.describe_group("g").queues
    assert (status.cursor, status.inflight) == (4, 4)


def test_a_receive_between_the_queues_of_a_reset_gets_the_reset_queue_anew(broker, monkeypatch):
    """The reset writes one queue after the other: a receive in between reads queue 0 again
    from its start, as new deliveries (attempt 1: its leases were dropped), while queue 1
    is as before the reset (its leases hold) until the reset writes it."""
    broker.admin.create_topic("t", queues=2)
    stored = {r.queue: body for body in (b"a", b"b") for r in send(broker, "t", body)}
    assert set(stored) == {0, 1}
    held = broker.consume.receive("g", "t", max_messages=10)
    assert sorted(r.delivery_attempt for r in held) == [1, 1]
    writer = broker.offset_reset._writer
    real = writer.reset
    inside: list = []

    def racing(group, topic, queue, **kwargs):
        if queue == 1 and not inside:  # queue 0 is reset, queue 1 not yet
            inside.extend(broker.consume.receive("g", "t", max_messages=10))
        return real(group, topic, queue, **kwargs)

    monkeypatch.setattr(writer, "reset", racing)
    result = broker.offset_reset.reset("g", "t", "earliest")
    assert [(r.message.queue, r.message.body, r.delivery_attempt) for r in inside] == [
        (0, stored[0], 1)
    ]
    assert [q.dropped_leases for q in result.queues] == [1, 1]
    assert set(ack_statuses(broker, "g", [r.receipt_handle for r in held])) == {"expired"}
    assert ack_statuses(broker, "g", [inside[0].receipt_handle]) == ["acked"]


def test_reset_keeps_other_attributes_of_the_summary(broker):
    broker.admin.create_topic("t", queues=1)
    batches(broker, "t", 2)
    broker.consume.receive("g", "t", max_messages=1)
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    key = {"group_name": {"S": "g"}, "stream": {"S": "t#0"}}
    ddb.update_item(
        TableName=broker.settings.groups_table,
        Key=key,
        UpdateExpression="SET extra = :x",
        ExpressionAttributeValues={":x": {"S": "kept"}},
    )
    broker.offset_reset.reset("g", "t", "earliest")
    item = ddb.get_item(TableName=broker.settings.groups_table, Key=key)["Item"]
    assert item["extra"] == {"S": "kept"} and "earliest_deadline" not in item


def test_client_errors_of_the_writer_are_not_swallowed(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    client = broker.offset_reset._writer._client

    def refuse(**kwargs):
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "x"}}, "Tx")

    monkeypatch.setattr(client, "transact_write_items", refuse)
    with pytest.raises(ClientError):
        broker.offset_reset.reset("g", "t", "earliest")


# ------------------------------------------------------ index items placed directly
# Expired batches, racing stored times and heads placed exactly; the service's reads and
# Spark's planning (cirrusmq.spark, without a Spark session) read the same log.
HOUR = 3600


def _put_entries(settings: Settings, topic: str, queue: int, specs: list) -> int:
    """Index items of one-per-spec batches (count, expires_at s, stored ms); the head after."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    base = 0
    requests = []
    for count, expires, stored in specs:
        requests.append(
            {
                "PutRequest": {
                    "Item": {
                        "stream": {"S": f"{topic}#{queue}"},
                        "base_offset": {"N": str(base)},
                        "count": {"N": str(count)},
                        "object_key": {"S": f"topics/topic={topic}/queue={queue}/{base}.parquet"},
                        "size_bytes": {"N": "10"},
                        "min_timestamp": {"N": str(stored)},
                        "max_timestamp": {"N": str(stored)},
                        "stored_timestamp": {"N": str(stored)},
                        "expires_at": {"N": str(expires)},
                    }
                }
            }
        )
        base += count
    for i in range(0, len(requests), 25):
        ddb.batch_write_item(RequestItems={settings.log_index_table: requests[i : i + 25]})
    ddb.put_item(
        TableName=settings.queue_heads_table,
        Item={"stream": {"S": f"{topic}#{queue}"}, "next_offset": {"N": str(base)}},
    )
    return base


def _stack(settings: Settings) -> StackOptions:
    return StackOptions(
        bucket=settings.bucket,
        log_index_table=settings.log_index_table,
        queue_heads_table=settings.queue_heads_table,
        region="us-east-1",
    )


def test_planning_finds_retained_batches_behind_many_recently_expired_ones(settings):
    """An empty index page means "go on from its floor", not "nothing retained": batches
    that expired within the clock-skew window cost a bounded number of pages per call."""
    now_s, expired = int(time.time()), 1000
    specs = [(1, now_s - 250 + i // 4, 0) for i in range(expired)]
    end = _put_entries(settings, "big", 0, specs + [(1, now_s + HOUR, 0)] * 5)
    log = QueueLog(_stack(settings), "big", queues=1)
    assert log.earliest(0, end) == expired
    for start in (0, log.earliest(0, end)):
        slices = log.slices(0, start, end)
        assert [s.first for s in slices] == list(range(expired, end))


def test_the_service_earliest_offset_loops_too(settings, broker):
    broker.admin.create_topic("big2", queues=1)
    broker_now = broker.log_reader._clock() // 1000  # noqa: SLF001 - the fake clock
    specs = [(1, broker_now - 250 + i // 4, 0) for i in range(1000)]
    end = _put_entries(settings, "big2", 0, specs + [(1, broker_now + HOUR, 0)] * 3)
    (info,) = broker.log_reader.offsets("big2")
    assert (info.min_offset, info.max_offset) == (1000, end)


def test_spark_and_the_service_agree_on_the_offset_for_a_timestamp(settings, broker):
    """Stored time is stamped before the append race: offset 2 (stored t+5) lost the race
    to offset 1 (stored t+20). Both must answer offset 1, not the first by stored time."""
    now_s = int(time.time())
    t = 1_790_000_000_000
    specs = [(1, now_s + HOUR, t - 5000), (1, now_s + HOUR, t + 20), (1, now_s + HOUR, t + 5)]
    end = _put_entries(settings, "race", 0, specs)
    spark_offset = QueueLog(_stack(settings), "race", queues=1).offset_at_time(0, t, end)
    service_offset = broker.log_reader.offset_for_timestamp("race", 0, t, end=end)
    assert (spark_offset, service_offset) == (1, 1)


def test_offset_for_a_timestamp_falls_back_to_the_newest_entries(settings, broker, monkeypatch):
    """The by-stored-time index is eventually consistent: when it finds nothing, the newest
    base-table entries (consistent) answer."""
    now_s = int(time.time())
    t = 1_790_000_000_000
    end = _put_entries(settings, "gsi", 0, [(2, now_s + HOUR, t - 10), (3, now_s + HOUR, t + 1)])
    monkeypatch.setattr(type(broker.log_reader._index), "stored_between", lambda *a, **k: [])  # noqa: SLF001
    assert broker.log_reader.offset_for_timestamp("gsi", 0, t, end=end) == 2
    assert broker.log_reader.offset_for_timestamp("gsi", 0, t + 100, end=end) == end


def test_streaming_with_a_limit_starts_at_the_retained_log(settings):
    """A stream behind retention with maxOffsetsPerTrigger: the limit is not spent on
    offsets that are gone (the batch would be empty, and the next one too...)."""
    pytest.importorskip("pyspark")
    from cirrusmq.spark.options import ReadOptions
    from cirrusmq.spark.source import CirrusMQStreamReader
    from pyspark.sql.streaming.datasource import ReadMaxRows

    now_s = int(time.time())
    specs = [(10, now_s - 2 * HOUR, 0)] * 50 + [(10, now_s + HOUR, 0)] * 5
    end = _put_entries(settings, "behind", 0, specs)
    read = ReadOptions.parse({"topic": "behind", "queues": "1"})
    reader = CirrusMQStreamReader(_stack(settings), read)
    latest = reader.latestOffset({"0": 0}, ReadMaxRows(20))
    assert latest == {"0": 520}
    slices = reader._stream_log().slices(0, 0, 520)  # noqa: SLF001
    assert sum(s.end - s.first for s in slices) == 20
    assert end == 550


@pytest.mark.parametrize("number", ["\u00b2", "\u0661", "\uff11", "1" * 7])
def test_queue_numbers_are_ascii_digits_or_a_4xx(broker, monkeypatch, number):
    """ "²".isdigit() is True but int("²") raises: that was a 500. Other Unicode digits
    ("١", fullwidth "１") int() accepts: they are refused as well (typed errors: 4xx)."""
    from cirrusmq_api.offset_schemas import ResetOffsetsRequest
    from cirrusmq_api.routes import offsets as offsets_routes
    from cirrusmq_broker.errors import InvalidRequest, QueueNotFound

    broker.admin.create_topic("t1", queues=2)
    monkeypatch.setattr(offsets_routes, "current_broker", lambda: broker)
    with pytest.raises(QueueNotFound):
        offsets_routes.read_messages("t1", number, offset=0)
    request = ResetOffsetsRequest.model_validate({"to": "offset", "offsets": {number: 0}})
    with pytest.raises(InvalidRequest):
        offsets_routes.reset_offsets("g1", "t1", request)
    assert offsets_routes._queue_number("12") == 12  # noqa: SLF001


def test_offset_reset_and_spark_planning_read_the_heads_consistently(settings, broker, monkeypatch):
    """A stale (eventually consistent) head is too low: a reset to latest would leave
    messages behind, a batch read or export would end short (moto is always consistent,
    so the test checks what is asked for)."""
    from cirrusmq_broker.services.offset_reset import ResetTarget
    from cirrusmq_broker.storage import queue_heads

    asked: list[bool] = []
    real = queue_heads.batch_get

    def spy(client, reads):  # noqa: ANN001, ANN202
        asked.extend(r.consistent for r in reads)
        return real(client, reads)

    monkeypatch.setattr(queue_heads, "batch_get", spy)
    broker.admin.create_topic("heads", queues=2)
    broker.offset_reset.reset("g1", "heads", ResetTarget.LATEST)
    assert asked and all(asked)
    asked.clear()
    QueueLog(_stack(settings), "heads", queues=2).heads()
    assert asked == [True]


def test_an_idle_stream_reuses_its_client_and_heads(settings, monkeypatch):
    """Spark polls latestOffset every ~10 ms when idle: one QueueLog per reader, the heads
    read at most once per HEADS_REUSE_SECONDS."""
    pytest.importorskip("pyspark")
    from cirrusmq.spark import source
    from cirrusmq.spark.options import ReadOptions
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    _put_entries(settings, "idle", 0, [(3, int(time.time()) + HOUR, 0)])
    made: list[int] = []
    real_heads = QueueLog.heads

    def counting_heads(self):  # noqa: ANN001, ANN202
        made.append(1)
        return real_heads(self)

    monkeypatch.setattr(QueueLog, "heads", counting_heads)
    now = [1000.0]
    monkeypatch.setattr(source.time, "monotonic", lambda: now[0])
    read = ReadOptions.parse({"topic": "idle", "queues": "1"})
    reader = source.CirrusMQStreamReader(_stack(settings), read)
    for _ in range(50):
        assert reader.latestOffset({"0": 0}, ReadAllAvailable()) == {"0": 3}
    assert len(made) == 1
    now[0] += source.HEADS_REUSE_SECONDS
    reader.latestOffset({"0": 0}, ReadAllAvailable())
    assert len(made) == 2
    assert reader._stream_log() is reader._stream_log()  # noqa: SLF001
    copy = pickle.loads(pickle.dumps(reader))  # Spark pickles readers: no boto3 client in it
    assert copy._cached_log is None and copy._cached_heads is None  # noqa: SLF001
