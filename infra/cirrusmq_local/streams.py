"""DynamoDB stream event sources, locally: the template's ``DynamoDB`` events.

moto keeps a table's stream (``StreamSpecification``) and serves it through the
``dynamodbstreams`` API; :class:`StreamPoller` reads each shard by iterator from ``LATEST``,
as Lambda's event source mapping does, and invokes the function with ``{"Records": [...]}``
(at most the event's ``BatchSize`` records). The mapping's ``FilterCriteria`` patterns are
applied (the subset the template uses: value lists, ``{"exists": bool}``). A failed run gets
its batch again, and with ``ReportBatchItemFailures`` the records from the earliest reported
one, at most ``MaximumRetryAttempts`` times; then the stream moves on. The polling is
the stack's own, like the mapping's on AWS: no broker call is counted for it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["StreamPoller", "StreamSource", "matches_pattern"]

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class StreamSource:
    """One function fed by one table's stream."""

    name: str
    table: str
    invoke: Callable[[dict[str, Any]], Any]
    batch_size: int = 100
    patterns: tuple[Mapping[str, Any], ...] = ()
    retry_attempts: int = 0
    """``MaximumRetryAttempts``: runs of a failed batch after the first."""
    report_batch_item_failures: bool = False
    """``FunctionResponseTypes: [ReportBatchItemFailures]``: the function's
    ``batchItemFailures`` name the records to run again."""


def matches_pattern(pattern: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """An EventBridge-style filter pattern (value lists and ``exists``) against a record."""
    for key, expected in pattern.items():
        present = isinstance(record, Mapping) and key in record
        value = record.get(key) if present else None
        if isinstance(expected, Mapping):
            if not present or not matches_pattern(expected, value):
                return False
            continue
        if not any(_matches(option, present, value) for option in expected):
            return False
    return True


def _deliver(source: StreamSource, records: list[dict[str, Any]]) -> None:
    """Run ``source`` on ``records`` and again on what failed, as the mapping's retries."""
    for _ in range(source.retry_attempts + 1):
        try:
            result = source.invoke({"Records": records})
        except Exception:  # noqa: BLE001 - as Lambda: logged, the batch is run again
            log.exception("%s failed on %d stream records", source.name, len(records))
            continue
        if not source.report_batch_item_failures:
            return
        start = _earliest_failed(result, records)
        if start is None:
            return
        records = records[start:]
    log.warning("%s: %d stream records left after the retries", source.name, len(records))


def _earliest_failed(result: Any, records: list[dict[str, Any]]) -> int | None:
    """Index of the earliest record ``result`` reports as failed (0 for a report Lambda
    takes as a whole failure: an identifier of no record), None when none failed."""
    failures = result.get("batchItemFailures") if isinstance(result, Mapping) else None
    if not failures:
        return None
    positions = {
        str((r.get("dynamodb") or {}).get("SequenceNumber")): i for i, r in enumerate(records)
    }
    found = [positions.get(str((f or {}).get("itemIdentifier") or "")) for f in failures]
    return 0 if None in found else min(i for i in found if i is not None)


def _matches(option: Any, present: bool, value: Any) -> bool:
    if isinstance(option, Mapping) and "exists" in option:
        return bool(option["exists"]) == present
    return present and value == option


class StreamPoller:
    """Polls every source's stream on one thread until :meth:`stop`."""

    def __init__(self, dynamodb: Any, streams: Any, sources: list[StreamSource]) -> None:
        self._dynamodb = dynamodb
        self._streams = streams
        self._sources = sources
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._iterators: list[tuple[StreamSource, str]] = []

    def start(self, *, background: bool = True) -> StreamPoller:
        """Open every shard at ``LATEST``; ``background``: poll on a thread of its own."""
        for source in self._sources:
            arn = self._dynamodb.describe_table(TableName=source.table)["Table"].get(
                "LatestStreamArn"
            )
            if not arn:
                log.warning("table %s has no stream: %s is not fed", source.table, source.name)
                continue
            for shard in self._streams.describe_stream(StreamArn=arn)["StreamDescription"][
                "Shards"
            ]:
                iterator = self._streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
                )["ShardIterator"]
                self._iterators.append((source, iterator))
        if self._iterators and background:
            self._thread = threading.Thread(target=self._run, name="cirrusmq-streams", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def poll_once(self) -> int:
        """Read every shard once and invoke the functions; the number of records read."""
        read = 0
        for i, (source, iterator) in enumerate(self._iterators):
            answer = self._streams.get_records(ShardIterator=iterator, Limit=source.batch_size)
            self._iterators[i] = (source, answer.get("NextShardIterator") or iterator)
            records = [json.loads(json.dumps(r, default=str)) for r in answer.get("Records", [])]
            read += len(records)
            if source.patterns:
                records = [
                    r for r in records if any(matches_pattern(p, r) for p in source.patterns)
                ]
            if records:
                _deliver(source, records)
        return read

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.poll_once():
                    continue
            except Exception:  # noqa: BLE001 - moto stopping, a transient error
                if self._stop.is_set():
                    return
                log.debug("stream poll failed", exc_info=True)
            self._stop.wait(POLL_INTERVAL_S)
