"""Large bodies (above the inline limit, up to 2 GiB): upload grants and message pointers.

A producer asks for a grant (:meth:`LargeBodyService.grant`), uploads the parts straight to
S3 with the presigned URLs, completes the upload, then sends a message whose ``large_body``
names the object. :meth:`LargeBodyService.resolve` checks the pointer (a key this service
handed out for this topic, the object there, its size) and gives the message its stored
form, which is the Amazon SQS Extended Client's:

- the body is ``["software.amazon.payloadoffloading.PayloadS3Pointer",
  {"s3BucketName": <bucket>, "s3Key": <key>}]``;
- the properties :data:`SIZE_PROPERTY` (the Extended Client's ``ExtendedPayloadSize``),
  :data:`KEY_PROPERTY`, :data:`BYTES_PROPERTY` and :data:`SHA256_PROPERTY`.

So an SQS client with the Extended Client library reads the payload itself, and every move
(retry, dead letter, redrive, transaction commit) carries the pointer with the message: the
body object is never copied, and nothing but its lifecycle rule deletes it. Its tier keeps
it at least :data:`~cirrusmq_broker.limits.LARGE_BODY_MIN_RETENTION_HOURS` (a dead-letter
topic's retention) or the topic's retention, whichever is longer.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .. import limits
from ..errors import InvalidLargeBody, MessageTooLarge
from ..model import LargeBody, MessageInput
from ..storage.batch_objects import retention_tier_days
from ..storage.large_bodies import (
    LargeBodyStore,
    UploadGrant,
    body_key,
    key_granted_ms,
    key_topic,
)
from .topic_catalog import TopicCatalog

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
SIZE_PROPERTY = "ExtendedPayloadSize"
"""The Extended Client's reserved attribute: the payload's size in bytes."""
KEY_PROPERTY = "cirrusmq.body.key"
BYTES_PROPERTY = "cirrusmq.body.size"
SHA256_PROPERTY = "cirrusmq.body.sha256"
RESERVED_PROPERTIES = frozenset({KEY_PROPERTY, BYTES_PROPERTY, SHA256_PROPERTY})
"""Set by the service only, on a message whose large body it checked."""
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Grant:
    upload: UploadGrant
    part_bytes: int
    expires_timestamp: int


def pointer_body(bucket: str, key: str) -> bytes:
    """The Extended Client's pointer JSON, the stored body of a large message."""
    return json.dumps(
        [POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}], separators=(",", ":")
    ).encode()


def stored_pointer(properties: Mapping[str, str]) -> LargeBody | None:
    """The checked pointer a stored message carries, if it is a large message."""
    key = properties.get(KEY_PROPERTY)
    if key is None or key_topic(key) is None:
        return None
    try:
        size = int(properties.get(BYTES_PROPERTY, ""))
    except ValueError:
        return None
    return LargeBody(key=key, size=size, sha256=properties.get(SHA256_PROPERTY, ""))


class LargeBodyService:
    def __init__(
        self, *, topics: TopicCatalog, store: LargeBodyStore, clock: Callable[[], int]
    ) -> None:
        self._topics = topics
        self._store = store
        self._clock = clock

    def grant(self, topic_name: str, size: int) -> Grant:
        """Start the upload of a body of ``size`` bytes for ``topic_name``."""
        topic = self._topics.active(topic_name)
        _check_size(size, "the body")
        now = self._clock()
        parts = -(-size // limits.LARGE_BODY_PART_BYTES)
        tier = retention_tier_days(
            max(topic.retention_hours, limits.LARGE_BODY_MIN_RETENTION_HOURS)
        )
        upload = self._store.grant_upload(
            body_key(topic.name, now),
            parts=parts,
            tier_days=tier,
            expires_s=limits.LARGE_BODY_URL_SECONDS,
        )
        return Grant(
            upload=upload,
            part_bytes=limits.LARGE_BODY_PART_BYTES,
            expires_timestamp=now + limits.LARGE_BODY_URL_SECONDS * 1000,
        )

    def resolve(self, topic_name: str, inputs: Sequence[MessageInput]) -> list[MessageInput]:
        """``inputs`` with each large-body pointer checked and turned into its stored form.

        Raises InvalidLargeBody (400) for a key this service did not hand out for this
        topic (or granted more than LARGE_BODY_SEND_WINDOW_SECONDS ago), an object that is
        missing (or whose upload was not completed), a size that differs from the object's
        or a malformed hash; MessageTooLarge above 2 GiB.
        """
        return [
            self._resolved(topic_name, raw, position) if raw.large_body else raw
            for position, raw in enumerate(inputs)
        ]

    def download_url(self, properties: Mapping[str, str]) -> str | None:
        """A presigned GET of a stored message's large body (None for an inline body)."""
        pointer = stored_pointer(properties)
        if pointer is None:
            return None
        return self._store.download_url(pointer.key, expires_s=limits.LARGE_BODY_URL_SECONDS)

    def _resolved(self, topic_name: str, raw: MessageInput, position: int) -> MessageInput:
        pointer = raw.large_body
        assert pointer is not None
        what = f"message {position}"
        if raw.body:
            raise InvalidLargeBody(f"{what}: a message with large_body has no inline body")
        _check_size(pointer.size, f"{what}: the large body")
        if not SHA256_PATTERN.fullmatch(pointer.sha256):
            raise InvalidLargeBody(f"{what}: sha256 must be 64 lowercase hex digits")
        if key_topic(pointer.key) != topic_name:
            raise InvalidLargeBody(
                f"{what}: {pointer.key[:300]!r} is not a large body uploaded for topic "
                f"{topic_name!r} (ask POST /v1/topics/{topic_name}/large-bodies for one)",
                details={"key": pointer.key[:300]},
            )
        granted = key_granted_ms(pointer.key)
        if (
            granted is None
            or self._clock() - granted > limits.LARGE_BODY_SEND_WINDOW_SECONDS * 1000
        ):
            raise InvalidLargeBody(
                f"{what}: {pointer.key!r} is not a large body granted within the last "
                f"{limits.LARGE_BODY_SEND_WINDOW_SECONDS} s (upload it again: its lifecycle "
                "tier counts from the upload)",
                details={"key": pointer.key},
            )
        stored = self._store.size_of(pointer.key)
        if stored is None:
            raise InvalidLargeBody(
                f"{what}: no large body at {pointer.key!r} (expired, or its upload was "
                "not completed)",
                details={"key": pointer.key},
            )
        if stored != pointer.size:
            raise InvalidLargeBody(
                f"{what}: the large body at {pointer.key!r} has {stored} bytes, "
                f"the message says {pointer.size}",
                details={"key": pointer.key, "stored_size": stored, "size": pointer.size},
            )
        return dataclasses.replace(
            raw,
            body=pointer_body(self._store.bucket, pointer.key),
            properties={
                **raw.properties,
                SIZE_PROPERTY: str(pointer.size),
                KEY_PROPERTY: pointer.key,
                BYTES_PROPERTY: str(pointer.size),
                SHA256_PROPERTY: pointer.sha256,
            },
        )


def _check_size(size: int, what: str) -> None:
    if not 1 <= size <= limits.MAX_LARGE_BODY_BYTES:
        raise MessageTooLarge(
            f"{what} has {size} bytes; a large body has 1 to "
            f"{limits.MAX_LARGE_BODY_BYTES} bytes (2 GiB)",
            details={"size": size, "max_size": limits.MAX_LARGE_BODY_BYTES},
        )
