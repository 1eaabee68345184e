"""Whether the broker moved a lease's messages on (retries, issue 9): the idempotency records
of the moves (ProducersTable) are looked up by their stamps, all in one batched read."""

from __future__ import annotations

import json
from typing import Any

from ..model import ProducerStamp
from .dynamo import KeysToRead, batch_get
from .producers import ProducerRecord, producer_key


class MoveRecords:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def any_recorded(self, stamps: list[ProducerStamp]) -> bool:
        keys = [{"producer_key": producer_key(s)} for s in stamps]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return bool(found[self._table])

    def recorded(self, stamps: list[ProducerStamp]) -> set[ProducerStamp]:
        """Those of ``stamps`` that have a record (one batched read)."""
        if not stamps:
            return set()
        by_key = {producer_key(s): s for s in stamps}
        keys = [{"producer_key": k} for k in by_key]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return {
            by_key[item["producer_key"]]
            for item in found[self._table]
            if item.get("producer_key") in by_key
        }

    def records(self, stamps: list[ProducerStamp]) -> dict[ProducerStamp, ProducerRecord]:
        """The recorded ones of ``stamps`` with their records (digest, the appends' base
        offsets per queue)."""
        by_key = {producer_key(s): s for s in stamps}
        keys = [{"producer_key": k} for k in by_key]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return {
            by_key[item["producer_key"]]: ProducerRecord(
                str(item.get("digest") or ""),
                {int(q): int(b) for q, b in json.loads(item.get("bases") or "{}").items()},
            )
            for item in found[self._table]
            if item.get("producer_key") in by_key
        }
