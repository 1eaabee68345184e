"""Batch objects in S3: immutable Parquet files, one per produce request and queue.

Two kinds of bucket hold them (:class:`BucketLayout`): a general purpose bucket (the
default) and an S3 Express One Zone directory bucket (``BATCH_STORAGE=express``). They
differ in three ways the store hides from its callers: where the retention tier goes (an
object tag, or the key's first path part, since a directory bucket's lifecycle rules
select by prefix only and it takes no tags), and how a listing pages (``StartAfter`` in key
order, or continuation tokens over an unordered listing, one tier prefix after another).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

from botocore.exceptions import ClientError
from ulid import ULID

RETENTION_TAG = "cirrusmq-retention-days"
RETENTION_TIERS_DAYS = (1, 2, 3, 7, 14, 30, 90)
"""Must match the bucket's lifecycle rules in template.yaml."""
TOPICS_PREFIX = "topics/"
TIER_PREFIX = "retention_days={days}/"
"""Directory buckets: the first path part of a batch object's key names its lifecycle tier
(one expiration rule per tier, by prefix, in template.yaml)."""
TIER_PREFIX_PATTERN = r"(?:retention_days=\d+/)?"
"""Matches a key's tier part, when it has one (a directory bucket's objects)."""
REUSE_EXISTING_OBJECT_SECONDS = 30
"""A re-run appends the object its first attempt wrote (same name, same content) only
while it is this young: the orphan sweeper's grace period (at least 60 s) must not run
out in between."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: dt.datetime


def object_key(topic: str, queue: int, stored_timestamp: int, name: str | None = None) -> str:
    """Hive-style key: ``topics/topic=<t>/queue=<q>/dt=<yyyy-mm-dd>/<name>.parquet``.

    ``name`` defaults to a ULID; an object a re-run may reuse has a name derived from what
    it holds (services/batch_writer.py).
    """
    day = dt.datetime.fromtimestamp(stored_timestamp / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    return f"{topic_prefix(topic)}queue={queue}/dt={day}/{name or ULID()}.parquet"


def topic_prefix(topic: str) -> str:
    return f"{TOPICS_PREFIX}topic={topic}/"


def queue_prefix(topic: str, queue: int) -> str:
    """The prefix of one queue's objects; its ``dt=`` days follow in date order."""
    return f"{topic_prefix(topic)}queue={queue}/"


def retention_tier_days(retention_hours: int) -> int:
    """The smallest lifecycle tier that keeps an object at least ``retention_hours``."""
    days = -(-retention_hours // 24)
    return next((tier for tier in RETENTION_TIERS_DAYS if tier >= days), RETENTION_TIERS_DAYS[-1])


def tier_prefix(days: int) -> str:
    return TIER_PREFIX.format(days=days)


class BucketLayout(Protocol):
    """How one kind of bucket stores tiers and pages listings (a store's strategy).

    A listing *position* is an opaque string: ``""`` is the start of the listing, and a
    position a page returned continues after that page.
    """

    name: str
    positions_survive_deletes: bool
    """Whether a position still covers every object after it once objects are deleted
    (a key to list after does; a continuation token over an unordered listing need not)."""

    def physical_key(self, key: str, tier_days: int) -> str:
        """The key an object named ``key`` (``topics/...``) is stored under."""
        ...

    def put_arguments(self, tier_days: int) -> dict[str, str]:
        """Extra PutObject arguments that file the object in its lifecycle tier."""
        ...

    def list_page(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        position: str,
        max_keys: int,
        tier_days: int | None,
    ) -> tuple[list[dict[str, Any]], str, bool]:
        """One listing call under logical ``prefix`` from ``position``: the objects, the
        position after them, and whether more may follow. ``tier_days``: only objects
        filed in that tier need be listed (None: every tier)."""
        ...

    def day_position(self, prefix: str, day: str | None) -> str:
        """A position whose listing covers at least the objects of ``day`` and later
        under the queue ``prefix`` (``None``: all of them)."""
        ...

    def resume_position(self, page_position: str, key: str) -> str:
        """Where to go on after ``key`` when a caller stops inside a page that was listed
        from ``page_position`` (some objects may be listed again)."""
        ...


class StandardLayout:
    """A general purpose bucket: the tier is an object tag, listings page in key order
    with ``StartAfter`` (a position is the last key listed)."""

    name = "standard"
    positions_survive_deletes = True

    def physical_key(self, key: str, tier_days: int) -> str:
        return key

    def put_arguments(self, tier_days: int) -> dict[str, str]:
        return {"Tagging": urlencode({RETENTION_TAG: tier_days})}

    def list_page(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        position: str,
        max_keys: int,
        tier_days: int | None,
    ) -> tuple[list[dict[str, Any]], str, bool]:
        after = {"StartAfter": position} if position else {}
        response = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=max_keys, **after)
        found = response.get("Contents", [])
        return found, found[-1]["Key"] if found else position, bool(response.get("IsTruncated"))

    def day_position(self, prefix: str, day: str | None) -> str:
        return f"{prefix}dt={day}" if day else prefix

    def resume_position(self, page_position: str, key: str) -> str:
        return key


class ExpressLayout:
    """An S3 Express One Zone directory bucket: the tier is the key's first path part
    (``retention_days=<n>/topics/...``); a directory bucket lists in no particular order
    and takes no ``StartAfter``, so a listing walks the tier prefixes one after another,
    each with continuation tokens (a position is ``<tier>\n<token>``), and a listing by
    day is the whole prefix (callers filter by write time)."""

    name = "express"
    positions_survive_deletes = False

    def physical_key(self, key: str, tier_days: int) -> str:
        return f"{tier_prefix(tier_days)}{key}"

    def put_arguments(self, tier_days: int) -> dict[str, str]:
        return {}

    def list_page(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        position: str,
        max_keys: int,
        tier_days: int | None,
    ) -> tuple[list[dict[str, Any]], str, bool]:
        chosen = RETENTION_TIERS_DAYS if tier_days is None else (tier_days,)
        tiers = [tier_prefix(days) for days in chosen]
        tier, _, token = position.partition("\n")
        if tier not in tiers:  # the start, or a position of another tier choice
            tier, token = tiers[0], ""
        request = {"Bucket": bucket, "Prefix": tier + prefix, "MaxKeys": max_keys}
        try:
            response = client.list_objects_v2(
                **request, **({"ContinuationToken": token} if token else {})
            )
        except ClientError as exc:  # a saved token S3 no longer takes: list the tier again
            if not token or exc.response.get("Error", {}).get("Code") != "InvalidArgument":
                raise
            response = client.list_objects_v2(**request)
        found = response.get("Contents", [])
        if response.get("IsTruncated"):
            return found, f"{tier}\n{response['NextContinuationToken']}", True
        following = tiers.index(tier) + 1
        if following < len(tiers):
            return found, tiers[following], True
        return found, position, False

    def day_position(self, prefix: str, day: str | None) -> str:
        return ""

    def resume_position(self, page_position: str, key: str) -> str:
        return page_position


LAYOUTS: dict[str, BucketLayout] = {"standard": StandardLayout(), "express": ExpressLayout()}
"""Bucket kinds by the name the ``BATCH_STORAGE`` setting gives."""


def layout_named(name: str) -> BucketLayout:
    try:
        return LAYOUTS[name or "standard"]
    except KeyError:
        raise ValueError(f"unknown batch storage {name!r} (one of {sorted(LAYOUTS)})") from None


class BatchObjectGone(Exception):
    """The object was deleted (retention or a purge) since its index item was read."""


class TopicObjectTaken(Exception):
    """An object under the name a writer derived holds other content (never reused,
    never overwritten)."""


class BatchObjectStore:
    """Writes, reads, lists and deletes batch objects."""

    def __init__(self, client: Any, bucket: str, *, layout: BucketLayout | None = None) -> None:
        self._client = client
        self._bucket = bucket
        self._layout = layout or LAYOUTS["standard"]

    @property
    def layout(self) -> BucketLayout:
        return self._layout

    def key_for(
        self,
        topic: str,
        queue: int,
        stored_timestamp: int,
        name: str | None = None,
        *,
        retention_hours: int,
    ) -> str:
        """The key a batch object of ``topic``/``queue`` is stored under in this bucket:
        :func:`object_key`, filed in the retention tier where the bucket needs that."""
        key = object_key(topic, queue, stored_timestamp, name)
        return self._layout.physical_key(key, retention_tier_days(retention_hours))

    def put(self, key: str, data: bytes, *, retention_hours: int) -> bool:
        """Write a new, immutable object; False if ``key`` exists already (If-None-Match)."""
        return self.put_tiered(key, data, tier_days=retention_tier_days(retention_hours))

    def put_tiered(self, key: str, data: bytes, *, tier_days: int) -> bool:
        """As :meth:`put`, tagged with a lifecycle tier given in days."""
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=data,
                ContentType="application/vnd.apache.parquet",
                IfNoneMatch="*",
                **self._layout.put_arguments(tier_days),
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                return False
            raise
        return True

    def get(self, key: str) -> bytes:
        try:
            return self._client.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BatchObjectGone(key) from exc
            raise

    def put_or_match(self, key: str, data: bytes, *, retention_hours: int) -> bool:
        """Write ``data`` under ``key`` unless it exists (False then). An existing object is
        accepted only when it holds exactly ``data`` (one GET, only on that path);
        otherwise TopicObjectTaken: a name is never trusted for its content."""
        if self.put(key, data, retention_hours=retention_hours):
            return True
        if self.get(key) != data:
            raise TopicObjectTaken(key)
        return False

    def age_seconds(self, key: str) -> float:
        """How long ago the object was written."""
        modified = self._client.head_object(Bucket=self._bucket, Key=key)["LastModified"]
        return (dt.datetime.now(tz=dt.UTC) - modified).total_seconds()

    def list(self, prefix: str) -> Iterator[StoredObject]:
        """Every object under the logical ``prefix`` (``topics/...``), in no set order."""
        position, more = "", True
        while more:
            page, position, more = self.list_page(prefix, position=position)
            yield from page

    def list_page(
        self,
        prefix: str,
        *,
        position: str = "",
        max_keys: int = 1000,
        retention_hours: int | None = None,
    ) -> tuple[list[StoredObject], str, bool]:
        """One listing call: objects under the logical ``prefix`` (``topics/...``) from
        ``position`` (``""``: the start; see :class:`BucketLayout`), the position after
        them, and whether more may follow. ``retention_hours``: where the key files the
        retention tier, list only that tier's objects (None: all; a general purpose
        bucket lists all anyway)."""
        tier = None if retention_hours is None else retention_tier_days(retention_hours)
        found, after, more = self._layout.list_page(
            self._client, self._bucket, prefix, position, max_keys, tier
        )
        return [StoredObject(o["Key"], o["Size"], o["LastModified"]) for o in found], after, more

    def day_position(self, prefix: str, day: str | None = None) -> str:
        """A listing position covering the queue ``prefix``'s objects of ``day`` on."""
        return self._layout.day_position(prefix, day)

    def resume_position(self, page_position: str, key: str) -> str:
        """Where a listing stopped at ``key`` inside the page read from ``page_position``
        goes on."""
        return self._layout.resume_position(page_position, key)

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self._client.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
