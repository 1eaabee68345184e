"""Idempotency records (ProducersTable): producer id + sequence → the original receipts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..model import ProducerStamp
from .dynamo import error_code, from_item, to_item

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
    token: str | None = None
    """A claim's token (a record put before its batches were appended, each index item
    carrying the token): the bases are where the batches go, and a resend finishes what
    the first attempt left undone. None: the record was written in the append's own
    transaction, so its batches are appended."""


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
            "bases": _bases(record.bases),
            "expires_at": expires_at,
            "scheduled_at": record.scheduled_at,
            "token": record.token,
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

    def claim(
        self, stamp: ProducerStamp, record: ProducerRecord, *, expires_at: int
    ) -> ProducerRecord | None:
        """Put ``record`` (a claim: it has a token) where no record of the stamp is (one
        conditional write). Returns None when it was put, else the record found."""
        request = self.put_request(stamp, record, expires_at=expires_at)["Put"]
        try:
            self._client.put_item(**request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            found = exc.response.get("Item")
            return _record(from_item(found)) if found else self.get(stamp)
        return None

    def move_claim(
        self, stamp: ProducerStamp, claim: ProducerRecord, bases: dict[int, int]
    ) -> bool:
        """Point the claim at other bases (its batch lost an offset to another append),
        only while it still has ``claim``'s token and bases. False: it changed meanwhile."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"producer_key": producer_key(stamp)}),
                UpdateExpression="SET bases = :new",
                ConditionExpression="#t = :t AND bases = :old",
                ExpressionAttributeNames={"#t": "token"},
                ExpressionAttributeValues=to_item(
                    {":t": claim.token, ":old": _bases(claim.bases), ":new": _bases(bases)}
                ),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def get(self, stamp: ProducerStamp) -> ProducerRecord | None:
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"producer_key": producer_key(stamp)}),
            ConsistentRead=True,
        ).get("Item")
        return _record(from_item(item)) if item else None


def _bases(bases: dict[int, int]) -> str:
    """The stored form of a record's bases (compared as a whole by a claim's move)."""
    return json.dumps(bases, separators=(",", ":"))


def _record(values: dict[str, Any]) -> ProducerRecord:
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
        token=values.get("token"),
    )
