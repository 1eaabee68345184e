"""Half objects in S3 (``half/<producer group>/<transaction id>/...``) and their commit copy.

Half objects are never under ``topics/``: consumers, Spark raw reads and the orphan sweeper
do not see them. They carry the target topic's retention tag, so one left behind by a crash
(written, never recorded on its transaction) is expired by the bucket's lifecycle rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from .batch_objects import BatchObjectGone, BatchObjectStore

__all__ = ["BatchObjectGone", "HalfObjectStore", "TopicObjectTaken"]

HALF_PREFIX = "half/"


class TopicObjectTaken(Exception):
    """A commit's topic object name holds other content (never overwritten)."""


class HalfObjectStore:
    """Writes, reads, copies (to ``topics/``) and deletes half objects."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        self._objects = BatchObjectStore(client, bucket)

    def put(self, key: str, data: bytes, *, retention_hours: int) -> int:
        """Write the object unless it exists (a retried send); returns its size."""
        if self._objects.put(key, data, retention_hours=retention_hours):
            return len(data)
        return int(self._client.head_object(Bucket=self._bucket, Key=key)["ContentLength"])

    def get(self, key: str) -> bytes:
        return self._objects.get(key)

    def put_topic_object(self, key: str, data: bytes, *, retention_hours: int) -> bool:
        """Write a commit object under ``topics/`` unless it exists (If-None-Match): an
        existing identical one (a re-run) is accepted (False), a different one refused
        (TopicObjectTaken) — a commit never overwrites an object another one indexed."""
        if self._objects.put(key, data, retention_hours=retention_hours):
            return True
        if self._objects.get(key) != data:
            raise TopicObjectTaken(key)
        return False

    def put_named(
        self, topic: str, queue: int, stored_timestamp: int, name: str, write: Callable[[str], bool]
    ) -> str:
        """As :meth:`BatchObjectStore.put_named` (a commit's topic object)."""
        return self._objects.put_named(topic, queue, stored_timestamp, name, write)

    def delete(self, keys: list[str]) -> None:
        if keys:
            self._objects.delete(keys)

    def exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True
