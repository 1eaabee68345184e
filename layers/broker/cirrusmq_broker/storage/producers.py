"""Idempotency records (ProducersTable): producer id + sequence → the original receipts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model import ProducerStamp, SendReceipt
from .dynamo import from_item, to_item

not_yet_recorded = "attribute_not_exists(producer_key)"


@dataclass(frozen=True)
class ProducerRecord:
    """What a producer's batch was answered with."""

    digest: str
    """Hash of the request payload: the same stamp with another payload is a conflict."""
    receipts: tuple[SendReceipt, ...]


def producer_key(stamp: ProducerStamp) -> str:
    return f"{stamp.producer_id}#{stamp.sequence}"


class ProducerRecords:
    """Builds the record put (part of the append transaction) and reads records back."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def put_request(
        self, stamp: ProducerStamp, record: ProducerRecord, *, expires_at: int
    ) -> dict[str, Any]:
        receipts = [[r.message_id, r.queue, r.offset] for r in record.receipts]
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "producer_key": producer_key(stamp),
                        "digest": record.digest,
                        "receipts": json.dumps(receipts, separators=(",", ":")),
                        "expires_at": expires_at,
                    }
                ),
                "ConditionExpression": not_yet_recorded,
            }
        }

    def get(self, stamp: ProducerStamp) -> ProducerRecord | None:
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"producer_key": producer_key(stamp)}),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        values = from_item(item)
        receipts = tuple(SendReceipt(m, q, o) for m, q, o in json.loads(values["receipts"]))
        return ProducerRecord(values["digest"], receipts)
