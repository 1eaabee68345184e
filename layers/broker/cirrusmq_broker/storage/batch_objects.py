"""Batch objects in S3: immutable Parquet files, one per produce request and queue."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import ClientError
from ulid import ULID

RETENTION_TAG = "cirrusmq-retention-days"
RETENTION_TIERS_DAYS = (1, 2, 3, 7, 14, 30, 90)
"""Must match the bucket's lifecycle rules in template.yaml."""
TOPICS_PREFIX = "topics/"
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


class BatchObjectGone(Exception):
    """The object was deleted (retention or a purge) since its index item was read."""


class TopicObjectTaken(Exception):
    """An object under the name a writer derived holds other content (never reused,
    never overwritten)."""


class BatchObjectStore:
    """Writes, reads, lists and deletes batch objects."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

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
                Tagging=urlencode({RETENTION_TAG: tier_days}),
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
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                yield StoredObject(obj["Key"], obj["Size"], obj["LastModified"])

    def list_page(
        self, prefix: str, *, start_after: str = "", max_keys: int = 1000
    ) -> tuple[list[StoredObject], bool]:
        """One listing call: objects under ``prefix`` after key ``start_after`` (in key
        order), and whether more follow."""
        after = {"StartAfter": start_after} if start_after else {}
        response = self._client.list_objects_v2(
            Bucket=self._bucket, Prefix=prefix, MaxKeys=max_keys, **after
        )
        found = [
            StoredObject(o["Key"], o["Size"], o["LastModified"])
            for o in response.get("Contents", [])
        ]
        return found, bool(response.get("IsTruncated"))

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self._client.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
