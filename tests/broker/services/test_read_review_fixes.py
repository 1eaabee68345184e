"""Regressions from the review of reads by offset / reset / Spark planning (no Spark session).

The index items are written directly so a test can place expired batches, racing stored
times and heads exactly where the bugs were."""

from __future__ import annotations

import pickle
import time

import boto3
import pytest
from cirrusmq.spark.options import StackOptions
from cirrusmq.spark.planning import QueueLog
from cirrusmq_broker.settings import Settings

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
    reader = CirrusMQStreamReader(_stack(settings), ReadOptions.parse({"topic": "behind"}))
    reader._cached_log = QueueLog(_stack(settings), "behind", queues=1)  # noqa: SLF001
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


def test_a_lease_id_with_unicode_digits_names_no_slot():
    from cirrusmq_broker.rules.group_state import lease_slot

    assert lease_slot("12.abc") == (12, False)
    assert lease_slot("\u00b2.abc") is None and lease_slot("\u00b2m.abc") is None


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
    reader = source.CirrusMQStreamReader(_stack(settings), ReadOptions.parse({"topic": "idle"}))
    reader._cached_log = QueueLog(_stack(settings), "idle", queues=1)  # noqa: SLF001
    for _ in range(50):
        assert reader.latestOffset({"0": 0}, ReadAllAvailable()) == {"0": 3}
    assert len(made) == 1
    now[0] += source.HEADS_REUSE_SECONDS
    reader.latestOffset({"0": 0}, ReadAllAvailable())
    assert len(made) == 2
    assert reader._stream_log() is reader._stream_log()  # noqa: SLF001
    copy = pickle.loads(pickle.dumps(reader))  # Spark pickles readers: no boto3 client in it
    assert copy._cached_log is None and copy._cached_heads is None  # noqa: SLF001
