"""S3 directory bucket (S3 Express One Zone) rules, enforced on moto's ordinary buckets.

moto has no directory buckets: the local stack creates an ``AWS::S3Express::DirectoryBucket``
as an ordinary bucket, and :func:`enforce_directory_bucket_rules` makes every boto3 client of
the process meet, on the buckets it names, the rules of a directory bucket that the broker's
storage depends on (docs/deploy.md):

- no object tags: a PutObject with ``Tagging``, PutObjectTagging and GetObjectTagging are
  refused (501 ``NotImplemented``);
- ListObjectsV2 takes no ``StartAfter`` (400 ``InvalidArgument``), a prefix must end in
  ``/`` and the only delimiter is ``/``; keys come in no lexicographic order (here a fixed
  shuffle: by a digest of the key), paged by continuation tokens.

It wraps ``botocore.client.BaseClient._make_api_call``, so it applies to clients created
before and after it, in this process (the local stack runs the handlers in-process).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from botocore.client import BaseClient
from botocore.exceptions import ClientError

__all__ = ["enforce_directory_bucket_rules"]

_lock = threading.Lock()
_buckets: Counter[str] = Counter()
_original: Callable[..., Any] | None = None


def enforce_directory_bucket_rules(*buckets: str) -> Callable[[], None]:
    """Treat ``buckets`` as directory buckets in this process; returns the undo (call it
    once). Several callers may enforce at once (the rules stay until the last undo)."""
    global _original
    with _lock:
        if _original is None:
            _original = BaseClient._make_api_call
            BaseClient._make_api_call = _make_api_call  # type: ignore[method-assign]
        _buckets.update(buckets)

    def undo() -> None:
        global _original
        with _lock:
            _buckets.subtract(buckets)
            for name in [b for b, count in _buckets.items() if count <= 0]:
                del _buckets[name]
            if not _buckets and _original is not None:
                BaseClient._make_api_call = _original  # type: ignore[method-assign]
                _original = None

    return undo


def _make_api_call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
    original = _original
    assert original is not None
    if client.meta.service_model.service_name != "s3" or params.get("Bucket") not in _buckets:
        return original(client, operation, params)
    if operation in ("PutObjectTagging", "GetObjectTagging", "DeleteObjectTagging"):
        raise _error(operation, "NotImplemented", 501, "directory buckets have no object tags")
    if operation == "PutObject" and params.get("Tagging"):
        raise _error(operation, "NotImplemented", 501, "directory buckets take no Tagging")
    if operation == "ListObjectsV2":
        return _list_unordered(client, original, params)
    return original(client, operation, params)


def _list_unordered(
    client: BaseClient, original: Callable[..., Any], params: dict[str, Any]
) -> Any:
    operation = "ListObjectsV2"
    if "StartAfter" in params:
        raise _error(operation, "InvalidArgument", 400, "StartAfter is not supported")
    prefix = params.get("Prefix", "")
    if prefix and not prefix.endswith("/"):
        raise _error(operation, "InvalidArgument", 400, "a prefix must end in a delimiter (/)")
    if params.get("Delimiter", "/") != "/":
        raise _error(operation, "InvalidArgument", 400, "the only delimiter is /")
    if params.get("Delimiter"):
        return original(client, operation, params)
    everything: list[dict[str, Any]] = []
    request = {"Bucket": params["Bucket"], "Prefix": prefix}
    while True:
        page = original(client, operation, request)
        everything += page.get("Contents", [])
        if not page.get("IsTruncated"):
            break
        request["ContinuationToken"] = page["NextContinuationToken"]
    everything.sort(key=lambda o: hashlib.sha256(o["Key"].encode()).digest())
    token = params.get("ContinuationToken")
    try:
        start = int(token.removeprefix("express-")) if token else 0
    except ValueError:
        raise _error(operation, "InvalidArgument", 400, "invalid continuation token") from None
    size = int(params.get("MaxKeys", 1000))
    chosen = everything[start : start + size]
    response: dict[str, Any] = {
        "Name": params["Bucket"],
        "Prefix": prefix,
        "MaxKeys": size,
        "KeyCount": len(chosen),
        "IsTruncated": start + size < len(everything),
        "ResponseMetadata": {"HTTPStatusCode": 200},
    }
    if chosen:
        response["Contents"] = chosen
    if token:
        response["ContinuationToken"] = token
    if response["IsTruncated"]:
        response["NextContinuationToken"] = f"express-{start + size}"
    return response


def _error(operation: str, code: str, status: int, message: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )
