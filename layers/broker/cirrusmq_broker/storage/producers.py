"""Idempotency records (ProducersTable): producer id + sequence → the original receipts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model import ProducerStamp
from .dynamo import from_item, to_item

not_yet_recorded = "attribute_not_exists(producer_key)"
recorded_before = "recorded_at <= :stale"
"""A deduplicating record as old as its window or older: the stamp is free again."""


@dataclass(frozen=True)
class ProducerRecord:
    """Where a producer's batch was stored.

    Only the base offset per queue is kept (a few bytes, whatever the batch's size): a
    retry carries the same messages (same digest), which route to the same queues in the
    same order, so its receipts follow from the bases.
    """

    digest: str
    """Hash of the request payload: the same stamp with another payload is a conflict."""
    bases: dict[int, int]
    """Queue → base offset the batch got there."""
    scheduled_at: int | None = None
    """For a send with delayed messages: the broker time (ms) their delays count from."""
    expires_at: int | None = None
    """When the record expires (epoch seconds, as stored)."""
    recorded_at: int | None = None
    """For a deduplicating send: when it was stored (broker ms)."""
    deduplication_ms: int | None = None
    """For a deduplicating send: how long it holds its stamp; a send with the stamp after
    that replaces the record (not stored: the condition of the put that replaces it)."""
    message_ids: tuple[str, ...] = ()
    """For a deduplicating send: its message ids, which a repeat answers whatever it
    carries."""


def producer_key(stamp: ProducerStamp) -> str:
    """The record's key: producer id and sequence, then the scope (the sending access key;
    a producer id never holds ``#`` or ``@``)."""
    key = f"{stamp.producer_id}#{stamp.sequence}"
    return f"{key}@{stamp.scope}" if stamp.scope else key


class ProducerRecords:
    """Builds the record put (part of the append transaction) and reads records back."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def put_request(
        self, stamp: ProducerStamp, record: ProducerRecord, *, expires_at: int
    ) -> dict[str, Any]:
        """The record's put: only where none is, or, for a deduplicating record, where the
        one there is older than its window."""
        item: dict[str, Any] = {
            "producer_key": producer_key(stamp),
            "digest": record.digest,
            "bases": json.dumps(record.bases, separators=(",", ":")),
            "expires_at": expires_at,
            "scheduled_at": record.scheduled_at,
        }
        put: dict[str, Any] = {"TableName": self._table, "ConditionExpression": not_yet_recorded}
        if record.deduplication_ms is not None and record.recorded_at is not None:
            item["recorded_at"] = record.recorded_at
            item["message_ids"] = json.dumps(list(record.message_ids), separators=(",", ":"))
            put["ConditionExpression"] = f"{not_yet_recorded} OR {recorded_before}"
            put["ExpressionAttributeValues"] = to_item(
                {":stale": record.recorded_at - record.deduplication_ms}
            )
        put["Item"] = to_item(item)
        return {"Put": put}

    def get(self, stamp: ProducerStamp) -> ProducerRecord | None:
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"producer_key": producer_key(stamp)}),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        values = from_item(item)
        bases = {int(q): base for q, base in json.loads(values["bases"]).items()}
        expires_at = values.get("expires_at")
        recorded_at = values.get("recorded_at")
        return ProducerRecord(
            values["digest"],
            bases,
            values.get("scheduled_at"),
            None if expires_at is None else int(expires_at),
            None if recorded_at is None else int(recorded_at),
            message_ids=tuple(json.loads(values.get("message_ids") or "[]")),
        )
