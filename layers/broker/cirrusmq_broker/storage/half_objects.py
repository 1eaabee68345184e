"""Half objects in S3 (``half/<producer group>/<transaction id>/...``) and their commit copy.

Half objects are never under ``topics/``: consumers, Spark raw reads and the orphan sweeper
do not see them. They carry the target topic's retention tag, so one left behind by a crash
(written, never recorded on its transaction) is expired by the bucket's lifecycle rules.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import ClientError

from .batch_objects import RETENTION_TAG, BatchObjectStore, retention_tier_days

HALF_PREFIX = "half/"


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

    def copy(self, source: str, target: str, *, retention_hours: int) -> None:
        """Server-side copy to a topic object (same content; a re-run writes it again)."""
        self._client.copy_object(
            Bucket=self._bucket,
            Key=target,
            CopySource={"Bucket": self._bucket, "Key": source},
            TaggingDirective="REPLACE",
            Tagging=urlencode({RETENTION_TAG: retention_tier_days(retention_hours)}),
            MetadataDirective="COPY",
        )

    def put_topic_object(self, key: str, data: bytes, *, retention_hours: int) -> None:
        """Write (or write again, same messages) a merged commit object under ``topics/``."""
        self._client.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType="application/vnd.apache.parquet",
            Tagging=urlencode({RETENTION_TAG: retention_tier_days(retention_hours)}),
        )

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
