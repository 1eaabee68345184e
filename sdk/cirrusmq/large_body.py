"""Bodies above the inline limit (4 MiB), up to 2 GiB: uploaded to and read from S3 directly.

The producer asks the service for an upload grant (``POST /v1/topics/{topic}/large-bodies``:
presigned URLs of a multipart upload, parts of 64 MiB), PUTs the parts while it hashes them,
completes the upload and sends a message that names the object (:class:`LargeBodyRef`). A
consumer's message carries a :class:`LargeBody` with a presigned GET URL; :meth:`LargeBody.open`
streams it and checks its size and SHA-256 at the end. Neither side ever holds more than one
chunk (1 MiB) of the body in memory, and neither needs S3 credentials (except to read a
payload an SQS Extended Client put in its own bucket: see :class:`LargeBody`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import quote

import httpx

from .errors import LargeBodyError, PayloadTooLargeError

if TYPE_CHECKING:
    from .transport import Transport

__all__ = [
    "INLINE_MAX_BYTES",
    "MAX_LARGE_BODY_BYTES",
    "BodyStream",
    "LargeBody",
    "LargeBodyRef",
    "upload_body",
]

SIZE_TEXT = re.compile(r"[0-9]{1,19}")
"""An Extended Client size attribute's text: ASCII digits (``str.isdigit`` also takes
``²``, which ``int`` refuses), at most a 64-bit count."""


POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
"""The Amazon SQS Extended Client's pointer class: its offloaded message's body is
``[POINTER_CLASS, {"s3BucketName": ..., "s3Key": ...}]``."""
SIZE_ATTRIBUTES = ("ExtendedPayloadSize", "SQSLargePayloadSize")
"""The attributes an Extended Client gives an offloaded message's size in."""


def extended_pointer(raw: bytes) -> tuple[str, str] | None:
    """(bucket, key) of an Extended Client pointer body; None for any other body."""
    if not raw.startswith(b'["' + POINTER_CLASS.encode() + b'"'):
        return None
    try:
        pointer = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not (
        isinstance(pointer, list)
        and len(pointer) == 2
        and pointer[0] == POINTER_CLASS
        and isinstance(pointer[1], dict)
        and isinstance(pointer[1].get("s3BucketName"), str)
        and isinstance(pointer[1].get("s3Key"), str)
    ):
        return None
    return pointer[1]["s3BucketName"], pointer[1]["s3Key"]


def payload_size(text: object) -> int | None:
    """The size an Extended Client's size attribute states; None when it is not one."""
    return int(text) if isinstance(text, str) and SIZE_TEXT.fullmatch(text) else None


INLINE_MAX_BYTES = 4 * 1024 * 1024
"""The largest body a message carries inline; a larger one is uploaded as its own object."""
MAX_LARGE_BODY_BYTES = 2 * 1024 * 1024 * 1024
"""The largest body the service takes (2 GiB)."""
CHUNK_BYTES = 1024 * 1024
"""What an upload or a download holds in memory at a time."""
PART_ATTEMPTS = 3
"""Tries of one part's PUT (a transfer error or a 5xx) before the upload is given up."""
TRANSFER_TIMEOUT_S = 60.0
"""The longest wait for S3 between two chunks of an upload or a download."""

BodySource = bytes | Path
"""An inline body's bytes, or a file whose contents are the body (read part by part)."""


@dataclass(frozen=True)
class LargeBodyRef:
    """What a sent message names: an uploaded body object."""

    key: str
    """The object's key, handed out by the service's upload grant."""
    size: int
    """The body's size in bytes."""
    sha256: str
    """Lowercase hex SHA-256 of the body."""

    def to_wire(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class LargeBody:
    """A received message's body object: read it with :meth:`open` (streamed) or
    :meth:`read` (all of it in memory)."""

    key: str
    size: int
    """The body's size in bytes."""
    sha256: str | None
    """Lowercase hex SHA-256 of the body; None when the producer did not state it (a
    message an Amazon SQS Extended Client sent): then only the size is checked."""
    url: str | None
    """A presigned GET of the body, valid for an hour after the message was received; None
    for an Extended Client's payload, read from ``bucket`` with this process's own S3
    access (boto3's default credentials and endpoint)."""
    bucket: str | None = None
    """The bucket of an Extended Client's payload (None: the service's own body)."""

    def open(self, *, chunk_bytes: int = CHUNK_BYTES) -> BodyStream:
        """The body as a readable binary stream (use it with ``with``)."""
        return BodyStream(self, chunk_bytes=chunk_bytes)

    def read(self) -> bytes:
        """The whole body (it is ``size`` bytes of memory: prefer :meth:`open` for big ones)."""
        with self.open() as stream:
            return stream.read()


class BodyStream(io.RawIOBase):
    """A large body read chunk by chunk (over HTTP, or from an Extended Client's bucket);
    at the end its size and SHA-256 are checked (:class:`~cirrusmq.errors.LargeBodyError`,
    code ``LargeBodyMismatch``, when they differ). Iterating it yields chunks of at most
    ``chunk_bytes``."""

    def __init__(self, body: LargeBody, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        super().__init__()
        self._body = body
        source = _s3_source if body.url is None else _http_source
        self._chunks, self._release, self._errors = source(body, chunk_bytes)
        self._pending = b""
        self._hash = hashlib.sha256()
        self._read = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending and not self._done:
            self._pending = self._next_chunk()
        taken = min(len(view), len(self._pending))
        view[:taken] = self._pending[:taken]
        self._pending = self._pending[taken:]
        return taken

    def chunks(self) -> Iterator[bytes]:
        """The rest of the body, chunk by chunk."""
        if self._pending:
            yield self._pending
            self._pending = b""
        while not self._done:
            chunk = self._next_chunk()
            if chunk:
                yield chunk

    def __iter__(self) -> Iterator[bytes]:  # type: ignore[override]
        return self.chunks()

    def close(self) -> None:
        if not self.closed:
            self._release()
        super().close()

    def _next_chunk(self) -> bytes:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._done = True
            self._verify()
            return b""
        except self._errors as exc:
            raise LargeBodyError(
                f"reading large body {self._body.key}: {exc}",
                code="LargeBodyUnavailable",
                retriable=True,
            ) from exc
        self._read += len(chunk)
        if self._read > self._body.size:  # stop at once: the object may be any size
            raise LargeBodyError(
                f"large body {self._body.key} has more than the {self._body.size} bytes its "
                "message says",
                code="LargeBodyMismatch",
            )
        self._hash.update(chunk)
        return chunk

    def _verify(self) -> None:
        body = self._body
        if self._read != body.size:
            raise LargeBodyError(
                f"large body {body.key} has {self._read} bytes, its message says {body.size}",
                code="LargeBodyMismatch",
            )
        if body.sha256 is not None and self._hash.hexdigest() != body.sha256:
            raise LargeBodyError(
                f"large body {body.key} does not match its SHA-256", code="LargeBodyMismatch"
            )


Chunks = tuple[Iterator[bytes], Callable[[], None], tuple[type[BaseException], ...]]
"""A body's chunks, what releases the connection, the errors reading them may raise."""


def _http_source(body: LargeBody, chunk_bytes: int) -> Chunks:
    assert body.url is not None
    client = httpx.Client(timeout=TRANSFER_TIMEOUT_S)
    try:
        response = client.send(client.build_request("GET", body.url), stream=True)
    except httpx.HTTPError as exc:
        client.close()
        raise LargeBodyError(
            f"reading large body {body.key}: {exc}", code="LargeBodyUnavailable", retriable=True
        ) from exc
    if response.status_code != 200:
        status = response.status_code
        response.close()
        client.close()
        raise LargeBodyError(
            f"reading large body {body.key}: S3 answered {status} (the URL expires an hour "
            "after the receive; the body expires with its topic's retention)",
            code="LargeBodyUnavailable",
            http_status=status,
            retriable=status >= 500,
        )

    def release() -> None:
        response.close()
        client.close()

    return response.iter_raw(chunk_bytes), release, (httpx.HTTPError,)


def _s3_source(body: LargeBody, chunk_bytes: int) -> Chunks:
    """An Extended Client's payload, read with boto3's default S3 client."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as exc:
        raise LargeBodyError(
            f"message body {body.key} is in S3 bucket {body.bucket} (an SQS Extended Client "
            "sent it): reading it needs boto3 (pip install boto3) and read access to it",
            code="LargeBodyUnavailable",
        ) from exc
    try:
        streaming = boto3.client("s3").get_object(Bucket=body.bucket, Key=body.key)["Body"]
    except (BotoCoreError, ClientError) as exc:
        raise LargeBodyError(
            f"reading s3://{body.bucket}/{body.key}: {exc}", code="LargeBodyUnavailable"
        ) from exc
    return streaming.iter_chunks(chunk_bytes), streaming.close, (BotoCoreError, ClientError)


def source_size(source: BodySource) -> int:
    return source.stat().st_size if isinstance(source, Path) else len(source)


def upload_body(transport: Transport, topic: str, source: BodySource) -> LargeBodyRef:
    """Upload ``source`` as a large body of ``topic``; the pointer a message names.

    One request to the service (the grant), one PUT per part and one POST (complete) to S3.
    A part that fails in transit or with a 5xx is sent again (up to :data:`PART_ATTEMPTS`
    times); an upload that fails is aborted (best effort; S3 drops unfinished uploads after
    a day anyway) and raises :class:`~cirrusmq.errors.LargeBodyError`.
    """
    path, request = grant_request(topic, source)
    return upload_granted(transport.request("POST", path, json_body=request), source)


def grant_request(topic: str, source: BodySource) -> tuple[str, dict[str, Any]]:
    """The path and JSON body of the grant request for ``source`` (checks its size)."""
    size = source_size(source)
    if not 1 <= size <= MAX_LARGE_BODY_BYTES:
        raise PayloadTooLargeError(
            f"a body of {size} bytes: a message body has 1 byte to 2 GiB",
            code="MessageTooLarge",
            details={"size": size, "max_size": MAX_LARGE_BODY_BYTES},
        )
    return f"/v1/topics/{quote(topic, safe='')}/large-bodies", {"size": size}


def upload_granted(grant: Any, source: BodySource) -> LargeBodyRef:
    """Upload ``source`` with a grant the service answered (blocking; see upload_body)."""
    size = source_size(source)
    key, part_bytes = str(grant["key"]), int(grant["part_bytes"])
    with httpx.Client(timeout=TRANSFER_TIMEOUT_S) as http, _opened(source) as reader:
        try:
            digest = hashlib.sha256()
            etags = []
            for number, url in enumerate(grant["part_urls"], start=1):
                offset = (number - 1) * part_bytes
                length = min(part_bytes, size - offset)
                etag, digest = _put_part(http, url, reader, offset, length, digest, key)
                etags.append(etag)
            _complete(http, str(grant["complete_url"]), etags, key)
        except BaseException:
            # an upload left unfinished is dropped by the bucket's lifecycle rule anyway
            with contextlib.suppress(httpx.HTTPError):
                http.delete(str(grant["abort_url"]))
            raise
    return LargeBodyRef(key=key, size=size, sha256=digest.hexdigest())


class _opened:
    """``source`` as a seekable binary reader (a file is opened and closed again)."""

    def __init__(self, source: BodySource) -> None:
        self._source = source
        self._file: BinaryIO | None = None

    def __enter__(self) -> BinaryIO:
        if isinstance(self._source, Path):
            self._file = open(self._source, "rb")  # noqa: SIM115 (closed in __exit__)
            return self._file
        return io.BytesIO(self._source)  # shares the bytes: no copy

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            self._file.close()


def _put_part(
    http: httpx.Client,
    url: str,
    reader: BinaryIO,
    offset: int,
    length: int,
    digest: Any,
    key: str,
) -> tuple[str, Any]:
    """PUT one part; its ETag and the body's hash continued over it (a retried part is
    hashed again from the hash before it)."""
    for attempt in range(1, PART_ATTEMPTS + 1):
        hashed = digest.copy()
        try:
            response = http.put(
                url,
                content=_chunks(reader, offset, length, hashed),
                headers={"Content-Length": str(length)},
            )
        except httpx.HTTPError as exc:
            if attempt == PART_ATTEMPTS:
                raise LargeBodyError(
                    f"uploading large body {key}: {exc}", code="LargeBodyUpload", retriable=True
                ) from exc
            continue
        if response.status_code == 200:
            return response.headers.get("ETag", ""), hashed
        if response.status_code < 500 or attempt == PART_ATTEMPTS:
            raise LargeBodyError(
                f"uploading large body {key}: S3 answered {response.status_code}",
                code="LargeBodyUpload",
                http_status=response.status_code,
                retriable=response.status_code >= 500,
            )
    raise AssertionError("unreachable")


def _chunks(reader: BinaryIO, offset: int, length: int, hashed: Any) -> Iterator[bytes]:
    reader.seek(offset)
    left = length
    while left:
        chunk = reader.read(min(CHUNK_BYTES, left))
        if not chunk:
            raise LargeBodyError("the body's file got shorter while it was uploaded")
        hashed.update(chunk)
        left -= len(chunk)
        yield chunk


def _complete(http: httpx.Client, url: str, etags: list[str], key: str) -> None:
    parts = "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
        for n, etag in enumerate(etags, start=1)
    )
    xml = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode()
    try:
        response = http.post(url, content=xml, headers={"Content-Type": "application/xml"})
    except httpx.HTTPError as exc:
        raise LargeBodyError(
            f"completing large body {key}: {exc}", code="LargeBodyUpload", retriable=True
        ) from exc
    if response.status_code != 200 or b"<Error>" in response.content:
        raise LargeBodyError(
            f"completing large body {key}: S3 answered {response.status_code}",
            code="LargeBodyUpload",
            http_status=response.status_code,
            retriable=response.status_code >= 500,
        )


def is_large(source: BodySource, threshold_bytes: int) -> bool:
    """Whether a message with this body goes out as a large body."""
    return isinstance(source, Path) or len(source) > threshold_bytes
