"""Large message bodies in S3: one object per body, uploaded by the producer itself.

The service never reads or writes a large body's bytes. It starts a multipart upload (so
the object is tagged with its lifecycle tier from the start), hands the producer presigned
URLs for the parts and for completing the upload, checks the finished object's size when a
message points at it, and presigns GET URLs for consumers. Keys live under the topic's
prefix: ``topics/topic=<t>/_bodies/dt=<yyyy-mm-dd>/<ulid>``. No queue part, so the orphan
sweeper, which walks ``queue=`` prefixes, never sees them; a topic's purge deletes them; and
the leading ``_`` hides them from Hive-style readers of ``topics/`` (Spark, Athena), which
skip paths starting with ``_`` or ``.``: a native Parquet read never meets a body.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import ClientError
from ulid import ULID

from .batch_objects import RETENTION_TAG, topic_prefix

BODIES_PART = "_bodies/"
KEY_PATTERN = re.compile(
    r"topics/topic=(?P<topic>[A-Za-z0-9_-]{1,127})/_bodies/dt=\d{4}-\d{2}-\d{2}/[0-9A-Z]{26}"
)
"""A key the service hands out; any other key is not a large body of this service."""


@dataclass(frozen=True)
class UploadGrant:
    """What a producer needs to upload one body without S3 credentials."""

    key: str
    upload_id: str
    part_urls: list[str]
    """PUT the n-th part (1-based) to ``part_urls[n - 1]``."""
    complete_url: str
    """POST the CompleteMultipartUpload XML here once every part is stored."""
    abort_url: str


def body_key(topic: str, now_ms: int) -> str:
    """A new body's key; its ULID carries ``now_ms``, the time of the grant."""
    day = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    return f"{topic_prefix(topic)}{BODIES_PART}dt={day}/{ULID.from_timestamp(now_ms / 1000)}"


def key_granted_ms(key: str) -> int | None:
    """When the grant of a key :func:`key_topic` accepts was made (ms since the epoch);
    None when its last part is not a ULID (no key this service handed out)."""
    try:
        return ULID.from_str(key.rsplit("/", 1)[1]).milliseconds
    except ValueError:
        return None


def key_topic(key: str) -> str | None:
    """The topic whose prefix ``key`` is a large body under, or None for any other key."""
    match = KEY_PATTERN.fullmatch(key)
    return match["topic"] if match else None


class LargeBodyStore:
    """Translates large-body operations to S3 calls on the message bucket."""

    def __init__(self, client: Any, bucket: str, *, presigner: Any | None = None) -> None:
        self._client = client
        self._bucket = bucket
        self._presigner = presigner or client

    @property
    def bucket(self) -> str:
        return self._bucket

    def grant_upload(self, key: str, *, parts: int, tier_days: int, expires_s: int) -> UploadGrant:
        """Start a multipart upload of ``parts`` parts, tagged with its lifecycle tier."""
        upload_id = self._client.create_multipart_upload(
            Bucket=self._bucket,
            Key=key,
            ContentType="application/octet-stream",
            Tagging=urlencode({RETENTION_TAG: tier_days}),
        )["UploadId"]
        common = {"Bucket": self._bucket, "Key": key, "UploadId": upload_id}
        return UploadGrant(
            key=key,
            upload_id=upload_id,
            part_urls=[
                self._presign("upload_part", {**common, "PartNumber": number}, expires_s)
                for number in range(1, parts + 1)
            ],
            complete_url=self._presign("complete_multipart_upload", common, expires_s),
            abort_url=self._presign("abort_multipart_upload", common, expires_s),
        )

    def size_of(self, key: str) -> int | None:
        """The stored object's size; None when there is no such (completed) object."""
        try:
            return int(self._client.head_object(Bucket=self._bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise

    def download_url(self, key: str, *, expires_s: int) -> str:
        return self._presign("get_object", {"Bucket": self._bucket, "Key": key}, expires_s)

    def _presign(self, operation: str, params: dict[str, Any], expires_s: int) -> str:
        return self._presigner.generate_presigned_url(
            operation, Params=params, ExpiresIn=expires_s, HttpMethod=None
        )
