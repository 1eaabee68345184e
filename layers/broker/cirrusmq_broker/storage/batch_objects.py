"""Batch objects in S3: immutable Parquet files, one per produce request and queue."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
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
"""A re-run appends the object its first attempt wrote only while it is this young: the
orphan sweeper's grace period (at least 60 s) must not run out in between."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: dt.datetime


def object_key(topic: str, queue: int, stored_timestamp: int, name: str | None = None) -> str:
    """Hive-style key: ``topics/topic=<t>/queue=<q>/dt=<yyyy-mm-dd>/<name>.parquet``.

    ``name`` defaults to a ULID; a stamped request uses ``<producer id>-<sequence>`` so that
    its retry finds the object already written instead of writing a second one.
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

    def put_named(
        self,
        topic: str,
        queue: int,
        stored_timestamp: int,
        name: str,
        write: Callable[[str], bool],
    ) -> str:
        """The key of an object to append, written under its derived ``name`` (``write(key)``
        is False when the key exists): a re-run finds its first attempt's object there and
        appends that one — unless it is old enough for the orphan sweeper to take at any
        moment (it deletes unindexed objects only); then the object gets a fresh name."""
        key = object_key(topic, queue, stored_timestamp, name)
        if not write(key) and self.age_seconds(key) >= REUSE_EXISTING_OBJECT_SECONDS:
            key = object_key(topic, queue, stored_timestamp)
            write(key)
        return key

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
