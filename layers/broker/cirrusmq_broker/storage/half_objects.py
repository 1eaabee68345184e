"""Half objects in S3 (``half/<producer group>/<transaction id>/...``).

Half objects are never under ``topics/``: consumers, Spark raw reads and the orphan sweeper
do not see them. They carry the target topic's retention tag, so one left behind by a crash
(written, never recorded on its transaction) is expired by the bucket's lifecycle rules.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .batch_objects import BatchObjectGone, BatchObjectStore, TopicObjectTaken

__all__ = ["BatchObjectGone", "HalfObjectStore", "TopicObjectTaken"]

HALF_PREFIX = "half/"


class HalfObjectStore:
    """Writes, reads and deletes half objects in the message bucket (a commit appends their
    content to the topic through services/batch_writer.py, wherever batch objects go)."""

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
