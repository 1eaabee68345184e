"""What AWS does on its own and moto does not: DynamoDB TTL deletes and S3 lifecycle expiry.

Both run inside the moto server process, on moto's own data structures, a bounded number of
items per call, resuming where the last call stopped. Through moto's API they would cost far
more: its ``Scan`` and ``ListObjectsV2`` sort the whole table or bucket for every page, and
reading an object's tags is one more request per object; here a pass is a walk over a
snapshot of the keys and tags are a dictionary lookup. The time they compare against is
the caller's (the local stack sends the broker's clock), so ``advance_time`` expires items.

* :class:`TtlExpirer` — deletes items whose TTL attribute (a Number, epoch seconds) is
  ``<= now``, like DynamoDB (which also leaves alone items more than five years past).
* :class:`LifecycleExpirer` — deletes objects that an enabled ``Expiration.Days`` rule
  matches (prefix, tags, sizes) once ``creation + days``, rounded up to the next midnight
  UTC, has passed — never earlier than S3 would. Object creation times are moto's wall-clock
  ``LastModified`` moved onto the broker clock with the offset it had at that moment.
"""

from __future__ import annotations

import bisect
import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClockHistory", "LifecycleExpirer", "PassResult", "TtlExpirer", "expiry_ms"]

DAY_MS = 86_400_000
FIVE_YEARS_S = 5 * 365 * 86_400

LockFor = Callable[[str], AbstractContextManager[Any]]
OnDelete = Callable[..., None]
"""Told of each deletion (table or bucket name, then the item's keys or the object's key),
under that table's or bucket's lock: the data directory journals it."""


def _no_lock(_: str) -> AbstractContextManager[Any]:
    return nullcontext()


@dataclass
class PassResult:
    """One bounded run: items looked at, deleted, and whether a full pass just ended."""

    examined: int = 0
    deleted: int = 0
    pass_complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"examined": self.examined, "deleted": self.deleted, "done": self.pass_complete}


@dataclass
class _Cursor:
    keys: list[Any] = field(default_factory=list)
    position: int = 0

    def exhausted(self) -> bool:
        return self.position >= len(self.keys)


class ClockHistory:
    """Offsets of the broker clock over wall time: ``[(wall_ms, offset_ms), ...]`` ascending.

    An object written at wall time ``w`` was written at broker time ``w + offset_at(w)``.
    """

    def __init__(self, changes: Sequence[Sequence[int]] = ()) -> None:
        pairs = sorted((int(w), int(o)) for w, o in changes)
        self._walls = [w for w, _ in pairs]
        self._offsets = [o for _, o in pairs]

    def offset_at(self, wall_ms: int) -> int:
        """The offset in force at ``wall_ms`` (0 before the first change)."""
        index = bisect.bisect_right(self._walls, wall_ms) - 1
        return self._offsets[index] if index >= 0 else 0


# ------------------------------------------------------------------------------ DynamoDB
class TtlExpirer:
    """Deletes TTL-expired items from one moto DynamoDB backend, ``budget`` items per call."""

    def __init__(
        self,
        backend: Any,
        lock_for: LockFor = _no_lock,
        chunk: int = 500,
        on_delete: OnDelete | None = None,
    ) -> None:
        self.backend = backend
        self.lock_for = lock_for
        self.chunk = chunk
        self.on_delete = on_delete
        self._cursors: dict[str, _Cursor] = {}
        self._mutex = threading.Lock()  # one caller at a time per backend

    def ttl_attribute(self, table_name: str) -> str | None:
        """The table's TTL attribute when TTL is enabled, else None."""
        table = self.backend.tables.get(table_name)
        if table is None or table.ttl.get("TimeToLiveStatus") != "ENABLED":
            return None
        return table.ttl.get("AttributeName")

    def run(self, table_name: str, now_s: float, budget: int = 5000) -> PassResult:
        """Look at up to ``budget`` items of the table (continuing the current pass)."""
        result = PassResult()
        with self._mutex:
            attribute = self.ttl_attribute(table_name)
            if attribute is None:
                self._cursors.pop(table_name, None)
                result.pass_complete = True
                return result
            cursor = self._cursors.get(table_name)
            if cursor is None or cursor.exhausted():
                with self.lock_for(table_name):
                    cursor = self._cursors[table_name] = _Cursor(self._snapshot(table_name))
            while result.examined < budget and not cursor.exhausted():
                step = min(self.chunk, budget - result.examined)
                end = min(cursor.position + step, len(cursor.keys))
                with self.lock_for(table_name):
                    table = self.backend.tables.get(table_name)
                    if table is None:
                        self._cursors.pop(table_name, None)
                        result.pass_complete = True
                        return result
                    for hash_key, range_key in cursor.keys[cursor.position : end]:
                        result.examined += 1
                        if self._expired(table, hash_key, range_key, attribute, now_s):
                            table.delete_item(hash_key, range_key)
                            if self.on_delete is not None:
                                self.on_delete(table_name, hash_key, range_key)
                            result.deleted += 1
                cursor.position = end
            result.pass_complete = cursor.exhausted()
            return result

    def _snapshot(self, table_name: str) -> list[tuple[Any, Any]]:
        table = self.backend.tables.get(table_name)
        if table is None:
            return []
        if table.range_key_attr is None:
            return [(h, None) for h in list(table.items)]
        return [(h, r) for h, by_range in list(table.items.items()) for r in list(by_range)]

    @staticmethod
    def _expired(table: Any, hash_key: Any, range_key: Any, attribute: str, now_s: float) -> bool:
        if range_key is None:
            item = table.items.get(hash_key)
        else:
            item = table.items.get(hash_key, {}).get(range_key)
        if item is None:
            return False
        value = item.attrs.get(attribute)
        if value is None or value.type != "N":
            return False
        try:
            expires = float(value.value)
        except (TypeError, ValueError):
            return False
        return now_s - FIVE_YEARS_S < expires <= now_s


# ------------------------------------------------------------------------------------ S3
def expiry_ms(created_ms: int, days: int) -> int:
    """When S3 expires an object: creation + ``days``, rounded up to the next midnight UTC
    (a time exactly at midnight still moves a day on: never earlier than S3)."""
    return ((created_ms + days * DAY_MS) // DAY_MS + 1) * DAY_MS


def _rule_matches(
    rule: Mapping[str, Any], key: str, size: int, tags: Callable[[], dict[str, str]]
) -> bool:
    block = rule.get("Filter")
    if block is None:  # legacy top-level Prefix
        return key.startswith(rule.get("Prefix") or "")
    conditions = block.get("And", block)
    if not key.startswith(conditions.get("Prefix") or ""):
        return False
    if size <= int(conditions.get("ObjectSizeGreaterThan", -1)):
        return False
    if "ObjectSizeLessThan" in conditions and size >= int(conditions["ObjectSizeLessThan"]):
        return False
    wanted = list(conditions.get("Tags") or [])
    if "Tag" in conditions:
        wanted.append(conditions["Tag"])
    if wanted:
        have = tags()
        return all(have.get(tag["Key"]) == tag["Value"] for tag in wanted)
    return True


class LifecycleExpirer:
    """Applies a bucket's ``Expiration.Days`` lifecycle rules in one moto S3 backend."""

    def __init__(
        self,
        backend: Any,
        lock_for: LockFor = _no_lock,
        chunk: int = 500,
        on_delete: OnDelete | None = None,
    ) -> None:
        self.backend = backend
        self.lock_for = lock_for
        self.chunk = chunk
        self.on_delete = on_delete
        self._cursors: dict[str, _Cursor] = {}
        self._mutex = threading.Lock()

    def run(
        self,
        bucket_name: str,
        rules: Sequence[Mapping[str, Any]],
        now_ms: int,
        history: ClockHistory | None = None,
        budget: int = 5000,
    ) -> PassResult:
        """Look at up to ``budget`` objects of the bucket (continuing the current pass)."""
        history = history or ClockHistory()
        result = PassResult()
        rules = [
            rule
            for rule in rules
            if rule.get("Status") == "Enabled" and "Days" in (rule.get("Expiration") or {})
        ]
        with self._mutex:
            if not rules or bucket_name not in self.backend.buckets:
                self._cursors.pop(bucket_name, None)
                result.pass_complete = True
                return result
            cursor = self._cursors.get(bucket_name)
            if cursor is None or cursor.exhausted():
                with self.lock_for(bucket_name):
                    keys = list(self.backend.buckets[bucket_name].keys.keys())
                cursor = self._cursors[bucket_name] = _Cursor(keys)
            while result.examined < budget and not cursor.exhausted():
                step = min(self.chunk, budget - result.examined)
                end = min(cursor.position + step, len(cursor.keys))
                with self.lock_for(bucket_name):
                    bucket = self.backend.buckets.get(bucket_name)
                    if bucket is None:
                        self._cursors.pop(bucket_name, None)
                        result.pass_complete = True
                        return result
                    for name in cursor.keys[cursor.position : end]:
                        result.examined += 1
                        if self._expired(bucket, name, rules, now_ms, history):
                            self.backend.delete_object(bucket_name, name)
                            if self.on_delete is not None:
                                self.on_delete(bucket_name, name)
                            result.deleted += 1
                cursor.position = end
            result.pass_complete = cursor.exhausted()
            return result

    def _expired(
        self,
        bucket: Any,
        name: str,
        rules: Sequence[Mapping[str, Any]],
        now_ms: int,
        history: ClockHistory,
    ) -> bool:
        key = bucket.keys.get(name)
        if key is None or not hasattr(key, "last_modified") or not hasattr(key, "size"):
            return False  # gone, or a delete marker
        modified = key.last_modified.replace(tzinfo=dt.UTC)
        wall_ms = int(modified.timestamp() * 1000)
        created_ms = wall_ms + history.offset_at(wall_ms)
        if now_ms < expiry_ms(created_ms, min(int(r["Expiration"]["Days"]) for r in rules)):
            return False  # too young for any rule: no need to read its tags

        def tags() -> dict[str, str]:
            return dict(self.backend.tagger.get_tag_dict_for_resource(key.arn))

        return any(
            now_ms >= expiry_ms(created_ms, int(rule["Expiration"]["Days"]))
            and _rule_matches(rule, name, int(key.size), tags)
            for rule in rules
        )


def iter_tables(backend: Any) -> Iterator[str]:
    """Names of the backend's tables with TTL enabled."""
    for name, table in list(backend.tables.items()):
        if table.ttl.get("TimeToLiveStatus") == "ENABLED":
            yield name
