"""The log index (LogIndexTable): one item per batch object, keyed by queue and base offset.

Items carry ``expires_at`` (retention); DynamoDB's TTL deletes them up to two days late, so
readers skip expired items themselves. Expiry grows with the offset (items are appended in
time order), which lets a reader find the first retained batch behind any number of
expired ones with a binary search instead of reading them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..model import IndexEntry, stream_id
from .dynamo import batch_write, error_code, from_item, to_item

not_yet_appended = "attribute_not_exists(base_offset)"
MAX_CLOCK_SKEW_SECONDS = 300
"""How far producers' clocks (which stamp expiry) may disagree."""
MAX_EXPIRED_PAGES = 8
EXPIRED_PAGE_SIZE = 100
STORED_TIME_INDEX = "by_stored_time"
STORE_ORDER_SLACK_MS = 60_000
"""Appends race: a batch stored up to this much later may hold a lower offset."""
MAX_STORED_MS = 2**62
MAX_HELD_COUNTED = 10_000
"""Held batches :meth:`LogIndex.held_count` reads of one queue at most."""


@dataclass(frozen=True)
class IndexPage:
    """Retained entries read from an offset, and where retained data starts."""

    entries: list[IndexEntry]
    floor: int
    """No retained message lies below this offset (from the offset asked for on)."""


class LogIndex:
    """Reads the index and builds the conditional puts that append to it."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    # ---------------------------------------------------------------- appending
    def put_request(
        self, entry: IndexEntry, *, expires_at: int, claim: str | None = None
    ) -> dict[str, Any]:
        """A transaction item that appends ``entry`` unless its offset is taken. ``claim``:
        the token of the idempotency claim the batch was appended under."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "stream": stream_id(entry.topic, entry.queue),
                        "base_offset": entry.base_offset,
                        "count": entry.count,
                        "object_key": entry.object_key,
                        "size_bytes": entry.size_bytes,
                        "min_timestamp": entry.min_timestamp,
                        "max_timestamp": entry.max_timestamp,
                        "stored_timestamp": entry.stored_timestamp,
                        "expires_at": expires_at,
                        "key_filter": entry.key_filter,
                        "held_until": entry.held_until,
                        "claim": claim,
                    }
                ),
                "ConditionExpression": not_yet_appended,
            }
        }

    def put(self, entry: IndexEntry, *, expires_at: int, claim: str | None = None) -> str | None:
        """Put ``entry`` unless its offset is taken (one conditional write). Returns None
        when it was put, else the claim token of the item holding the offset ('' for an
        item appended without one).

        Without a claim, an item holding the entry's own batch object is this put's: it
        landed, its answer was lost, and botocore's resend found it (None, as put). That
        rests on what calls it without a claim: sends without a producer stamp, whose
        objects have fresh names only their attempt knows (services/batch_writer.py); a
        writer of derived names (moves, commits, released delays) has a claim or commits
        in a transaction."""
        request = self.put_request(entry, expires_at=expires_at, claim=claim)["Put"]
        try:
            self._client.put_item(**request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            found = from_item(exc.response.get("Item") or {})
            own = found.get("object_key") == entry.object_key and not found.get("claim")
            if claim is None and own:
                return None
            return str(found.get("claim", ""))
        return None

    def claim_at(self, topic: str, queue: int, base_offset: int) -> str | None:
        """The claim token of the item at exactly ``base_offset`` (a consistent read):
        None if no item is there, '' for an item appended without a claim."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"stream": stream_id(topic, queue), "base_offset": base_offset}),
            ProjectionExpression="claim, base_offset",
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else str(from_item(item).get("claim", ""))

    def chain_end(self, topic: str, queue: int, floor: int) -> int:
        """Where the queue's log ends: past every item at or above ``floor`` (the head,
        which appended items not yet published may lie beyond), else ``floor``."""
        end = floor
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset >= :b",
            ExpressionAttributeNames={"#s": "stream", "#c": "count"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":b": floor}),
            ProjectionExpression="base_offset, #c",
            ConsistentRead=True,
        ):
            for values in map(from_item, page["Items"]):
                end = max(end, int(values["base_offset"]) + int(values["count"]))
        return end

    def take_back(self, entry: IndexEntry, *, claim: str | None) -> None:
        """Delete the item of an append that was refused after its put (its topic was
        deleted before it was published): only if the item is that append's."""
        condition, values = (
            ("claim = :c", {":c": claim})
            if claim
            else ("object_key = :k", {":k": entry.object_key})
        )
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=to_item(
                    {
                        "stream": stream_id(entry.topic, entry.queue),
                        "base_offset": entry.base_offset,
                    }
                ),
                ConditionExpression=condition,
                ExpressionAttributeValues=to_item(values),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    # ---------------------------------------------------------------- reading
    def read_from(
        self, topic: str, queue: int, base_offset: int, limit: int, *, now_s: int, end: int
    ) -> IndexPage:
        """Up to ``limit`` unexpired entries with base offset >= ``base_offset``, in order.

        Expired entries are skipped even while TTL has not deleted them. A page of nothing
        but expired entries is passed with one binary search (about log2(end - offset)
        single-item queries) to within the clock-skew window of the first retained entry,
        then at most ``MAX_EXPIRED_PAGES`` pages are read on: any number of expired entries
        costs a bounded number of calls, and ``floor`` says how far this call got, so the
        caller stores it and the next call goes on from there. ``end`` is the queue's next
        offset (its head): nothing is skipped or returned beyond it.
        """
        floor, searched = base_offset, False
        for _ in range(MAX_EXPIRED_PAGES + 1):
            # an item at or past the head is put and not yet published: not part of the log
            items = [
                i for i in self._query_from(topic, queue, floor, limit) if i[0].base_offset < end
            ]
            if not items:  # everything below the head is gone (retained ones are contiguous)
                return IndexPage([], max(floor, end))
            live = [e for e, expires in items if expires > now_s]
            if live:
                return IndexPage(live, live[0].base_offset)
            floor = max(floor, items[-1][0].next_offset)
            if len(items) < limit or floor >= end:
                break
            if not searched:
                floor, searched = self._first_retained(topic, queue, floor, end, now_s), True
            limit = EXPIRED_PAGE_SIZE
        return IndexPage([], min(floor, max(end, base_offset)))

    def retained_from(
        self, topic: str, queue: int, base_offset: int, limit: int, *, now_s: int, end: int
    ) -> IndexPage:
        """Like :meth:`read_from`, but goes on from each page's ``floor`` until it finds
        retained entries or reaches ``end``: an empty page means nothing is retained in
        ``[base_offset, end)``, never "go on from floor". For readers that plan or list a
        whole range (Spark, the earliest offset, dead letters), not for bounded calls."""
        page = self.read_from(topic, queue, base_offset, limit, now_s=now_s, end=end)
        while not page.entries and page.floor < end:
            floor = page.floor
            page = self.read_from(topic, queue, floor, limit, now_s=now_s, end=end)
            if not page.entries and page.floor <= floor:  # no progress: nothing more to find
                return IndexPage([], end)
        return page

    def entry_at(self, topic: str, queue: int, offset: int) -> IndexEntry | None:
        """The entry whose batch holds ``offset`` (a consistent read: "none" may be taken
        for "past retention", which an eventually consistent read missing a batch appended
        a moment ago would fake)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset <= :o",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":o": offset}),
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = response["Items"]
        entry = _entry(topic, queue, from_item(items[0])) if items else None
        return entry if entry and offset < entry.next_offset else None

    def covering(self, topic: str, queue: int, first: int, last: int) -> list[IndexEntry]:
        """Entries holding offsets ``first``..``last`` (two queries: the batch holding
        ``first``, then one page of up to 100 batches after it)."""
        head = self.entry_at(topic, queue, first)
        start = head.next_offset if head else first
        rest = self._query_from(topic, queue, start, 100) if start <= last else []
        return ([head] if head else []) + [e for e, _ in rest if e.base_offset <= last]

    def first_offset(self, topic: str, queue: int, *, now_s: int, end: int) -> int:
        """The lowest retained offset of a queue (``end`` when nothing is retained)."""
        page = self.retained_from(topic, queue, 0, 1, now_s=now_s, end=end)
        return page.entries[0].base_offset if page.entries else min(page.floor, end)

    def offset_at_time(
        self, topic: str, queue: int, timestamp_ms: int, *, end: int, limit: int = 32
    ) -> int:
        """The lowest offset stored at or after ``timestamp_ms`` (``end`` if none), from
        stored timestamps only (no object is read).

        Stored time is stamped before the append race, so a lower offset may carry a
        slightly later stored time: of the first ``limit`` batches stored at or after the
        timestamp, the lowest offset among those stored within ``STORE_ORDER_SLACK_MS`` of
        the first is taken. The by-stored-time index is eventually consistent: when it
        finds nothing, the newest base-table entries (read consistently) are looked at.
        May be below the retained range while TTL has not removed expired items: callers
        clamp it."""
        entries = self.stored_between(topic, queue, timestamp_ms, MAX_STORED_MS, limit=limit)
        if not entries:
            recent = self.newest(topic, queue, limit, consistent=True)
            entries = sorted(
                (e for e in recent if e.stored_timestamp >= timestamp_ms),
                key=lambda e: e.stored_timestamp,
            )
        if not entries:
            return end
        horizon = entries[0].stored_timestamp + STORE_ORDER_SLACK_MS
        return min(end, min(e.base_offset for e in entries if e.stored_timestamp <= horizon))

    def stored_between(
        self, topic: str, queue: int, start_ms: int, end_ms: int, *, limit: int = 100
    ) -> list[IndexEntry]:
        """Entries stored in [start_ms, end_ms], oldest first (the by-stored-time index)."""
        response = self._client.query(
            TableName=self._table,
            IndexName=STORED_TIME_INDEX,
            KeyConditionExpression="#s = :s AND stored_timestamp BETWEEN :a AND :b",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item(
                {":s": stream_id(topic, queue), ":a": start_ms, ":b": end_ms}
            ),
            Limit=limit,
        )
        return [_entry(topic, queue, from_item(item)) for item in response["Items"]]

    def stored_newest_first(
        self,
        topic: str,
        queue: int,
        start_ms: int,
        end_ms: int,
        *,
        limit: int,
        after: dict[str, Any] | None = None,
    ) -> tuple[list[tuple[IndexEntry, int]], dict[str, Any] | None]:
        """One page of the entries stored in [start_ms, end_ms], newest first (entries
        stored in the same millisecond in no set order), each with its expiry (s); and
        where the next page starts (None: this was the last)."""
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": STORED_TIME_INDEX,
            "KeyConditionExpression": "#s = :s AND stored_timestamp BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#s": "stream"},
            "ExpressionAttributeValues": to_item(
                {":s": stream_id(topic, queue), ":a": start_ms, ":b": end_ms}
            ),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if after is not None:
            query["ExclusiveStartKey"] = after
        response = self._client.query(**query)
        entries = [
            (_entry(topic, queue, values), int(values.get("expires_at", 0)))
            for values in map(from_item, response["Items"])
        ]
        return entries, response.get("LastEvaluatedKey")

    def held_count(
        self, topic: str, queue: int, *, now: int, stored_since: int, from_offset: int
    ) -> int:
        """Messages of batches stored since ``stored_since`` (ms), at or after
        ``from_offset``, whose not-before time is still ahead of ``now``: one query of the
        by-stored-time index (a few pages at most; the count is approximate beyond)."""
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            IndexName=STORED_TIME_INDEX,
            KeyConditionExpression="#s = :s AND stored_timestamp BETWEEN :a AND :b",
            FilterExpression="held_until > :now AND base_offset >= :from",
            ProjectionExpression="base_offset, #c",
            ExpressionAttributeNames={"#s": "stream", "#c": "count"},
            ExpressionAttributeValues=to_item(
                {
                    ":s": stream_id(topic, queue),
                    ":a": stored_since,
                    ":b": MAX_STORED_MS,
                    ":now": now,
                    ":from": from_offset,
                }
            ),
            PaginationConfig={"MaxItems": MAX_HELD_COUNTED},
        )
        return sum(int(from_item(item)["count"]) for page in pages for item in page["Items"])

    def newest(
        self, topic: str, queue: int, limit: int, *, consistent: bool = False
    ) -> list[IndexEntry]:
        """The ``limit`` newest entries of a queue, newest first."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue)}),
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=consistent,
        )
        return [_entry(topic, queue, from_item(item)) for item in response["Items"]]

    def keys_of(self, topic: str, queue: int) -> list[tuple[int, str]]:
        """(base offset, object key) of every entry of a queue (maintenance only)."""
        found: list[tuple[int, str]] = []
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue)}),
            ProjectionExpression="base_offset, object_key",
            ConsistentRead=True,
        ):
            found.extend((v["base_offset"], v["object_key"]) for v in map(from_item, page["Items"]))
        return found

    def delete_entries(self, topic: str, queue: int, base_offsets: list[int]) -> None:
        stream = stream_id(topic, queue)
        for start in range(0, len(base_offsets), 25):
            requests = [
                {"DeleteRequest": {"Key": to_item({"stream": stream, "base_offset": b})}}
                for b in base_offsets[start : start + 25]
            ]
            batch_write(self._client, self._table, requests)

    # ---------------------------------------------------------------- maintenance
    def keys_stored_between(self, topic: str, queue: int, start_ms: int, end_ms: int) -> set[str]:
        """Object keys of every entry stored in [start_ms, end_ms] (by-stored-time index).

        Reads every page of the window. The index is eventually consistent: an entry
        appended a moment ago may be missing (the orphan sweeper asks only about older ones).
        """
        found: set[str] = set()
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            IndexName=STORED_TIME_INDEX,
            KeyConditionExpression="#s = :s AND stored_timestamp BETWEEN :a AND :b",
            ExpressionAttributeNames={"#s": "stream", "#k": "object_key"},
            ExpressionAttributeValues=to_item(
                {":s": stream_id(topic, queue), ":a": start_ms, ":b": end_ms}
            ),
            ProjectionExpression="#k",
        ):
            found.update(from_item(item)["object_key"] for item in page["Items"])
        return found

    def base_offsets_after(self, topic: str, queue: int, after: int, limit: int) -> list[int]:
        """Base offsets of up to ``limit`` entries above ``after``, in order (purging)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset > :b",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":b": after}),
            ProjectionExpression="base_offset",
            Limit=limit,
            ConsistentRead=True,
        )
        return [int(from_item(item)["base_offset"]) for item in response["Items"]]

    # ---------------------------------------------------------------- reads by offset
    def entry_holding(
        self, topic: str, queue: int, offset: int, *, now_s: int
    ) -> IndexEntry | None:
        """The retained entry whose batch holds ``offset`` (None if expired or absent)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset <= :o",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":o": offset}),
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        if not response["Items"]:
            return None
        values = from_item(response["Items"][0])
        entry = _entry(topic, queue, values)
        live = int(values.get("expires_at", 0)) > now_s
        return entry if live and offset < entry.next_offset else None

    # ---------------------------------------------------------------- internals
    def _query_from(
        self, topic: str, queue: int, base_offset: int, limit: int
    ) -> list[tuple[IndexEntry, int]]:
        """Up to ``limit`` entries from ``base_offset`` on, each with its expiry (s)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset >= :b",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":b": base_offset}),
            Limit=limit,
            ConsistentRead=True,
        )
        return [
            (_entry(topic, queue, values), int(values.get("expires_at", 0)))
            for values in map(from_item, response["Items"])
        ]

    def _first_retained(self, topic: str, queue: int, low: int, end: int, now_s: int) -> int:
        """Base offset of the first unexpired entry in [low, end), else ``end``.

        Everything below ``low`` is known to be expired. Expired entries may be gone
        already (TTL), but retained ones are contiguous up to ``end``. Expiry comes from
        each producer's clock, so it only roughly grows with the offset: the search counts
        an entry as expired only when it expired more than ``MAX_CLOCK_SKEW_SECONDS`` ago,
        and may so stop a little early; the caller's exact filter skips the rest.
        """
        answer, high = end, end
        while low < high:
            middle = (low + high) // 2
            found = self._query_from(topic, queue, middle, 1)
            if not found or found[0][0].base_offset >= answer:
                high = middle  # nothing in [middle, answer): look lower
            elif found[0][1] + MAX_CLOCK_SKEW_SECONDS > now_s:  # not surely expired
                answer, high = found[0][0].base_offset, middle  # nothing in [middle, answer)
            else:
                low = found[0][0].next_offset
        return answer


def _entry(topic: str, queue: int, values: dict[str, Any]) -> IndexEntry:
    return IndexEntry(
        topic=topic,
        queue=queue,
        base_offset=values["base_offset"],
        count=values["count"],
        object_key=values["object_key"],
        size_bytes=values["size_bytes"],
        min_timestamp=values["min_timestamp"],
        max_timestamp=values["max_timestamp"],
        stored_timestamp=values.get("stored_timestamp", values["max_timestamp"]),
        key_filter=_bytes(values.get("key_filter")),
        held_until=values.get("held_until"),
    )


def _bytes(value: Any) -> bytes | None:
    """A binary attribute as bytes (boto3 reads it as ``Binary``)."""
    return None if value is None else bytes(getattr(value, "value", value))
