"""Whether the broker moved a lease's messages on (to a retry or dead-letter topic): the
idempotency records of the moves (ProducersTable) are looked up by their stamps, all in
one batched read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model import ProducerStamp
from .dynamo import KeysToRead, batch_get, to_item
from .producers import producer_key


@dataclass(frozen=True)
class MoveRecord:
    """A move's record (its digest, its appends' base offsets per queue), or a trace of an
    in-place redelivery (the ``offsets`` it superseded)."""

    digest: str
    bases: dict[int, int]
    offsets: frozenset[int] = frozenset()


class MoveRecords:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def any_recorded(self, stamps: list[ProducerStamp]) -> bool:
        """Whether any of ``stamps`` has a record (one batched read). With :meth:`recorded`,
        the reads of the previous release's dead-letter service (still running while a
        deployment rolls out; tests/unit/test_dead_letters.py runs it on these tables)."""
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

    def trace_request(
        self, stamp: ProducerStamp, offsets: list[int], *, expires_at: int
    ) -> dict[str, Any]:
        """A transaction item recording that the delivery ``stamp`` names was superseded
        (redelivered in place) while ``offsets`` were unsettled: read back by
        :meth:`records` as a record whose ``offsets`` are those."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "producer_key": producer_key(stamp),
                        "digest": "",
                        "bases": "{}",
                        "offsets": json.dumps(sorted(offsets), separators=(",", ":")),
                        "expires_at": expires_at,
                    }
                ),
            }
        }

    def records(self, stamps: list[ProducerStamp]) -> dict[ProducerStamp, MoveRecord]:
        """The recorded ones of ``stamps`` with their records (digest, the appends' base
        offsets per queue)."""
        return self.records_with(stamps, [])[0]

    def records_with(
        self, stamps: list[ProducerStamp], other: list[KeysToRead]
    ) -> tuple[dict[ProducerStamp, MoveRecord], dict[str, list[dict[str, Any]]]]:
        """:meth:`records`, and the items of ``other`` (other tables' keys) read in the same
        batched read."""
        by_key = {producer_key(s): s for s in stamps}
        keys = [{"producer_key": k} for k in by_key]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True), *other])
        records = {
            by_key[item["producer_key"]]: MoveRecord(
                str(item.get("digest") or ""),
                {int(q): int(b) for q, b in json.loads(item.get("bases") or "{}").items()},
                frozenset(int(o) for o in json.loads(item.get("offsets") or "[]")),
            )
            for item in found[self._table]
            if item.get("producer_key") in by_key
        }
        return records, found
