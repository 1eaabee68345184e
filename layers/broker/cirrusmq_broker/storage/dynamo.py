"""Small helpers shared by the DynamoDB stores: item (de)serialisation, error reading."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from ..errors import Throttled

BATCH_WRITE_LIMIT = 25
"""AWS's limit; moto accepts more, so it is enforced here."""

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values → DynamoDB attribute values (None values are left out)."""
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values → plain values (numbers as int where integral)."""
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


def write_one(client: Any, request: dict[str, Any], **extra: Any) -> None:
    """Run one transaction item (``{"Put" | "Delete" | "Update": body}``) as a call of
    its own, with ``extra`` arguments."""
    kind, body = next(iter(request.items()))
    call = {"Put": client.put_item, "Delete": client.delete_item, "Update": client.update_item}
    call[kind](**body, **extra)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def lost_race(exc: ClientError) -> bool:
    """Whether a conditional write (or a transaction) failed because what it was
    conditional on changed: the caller reads again."""
    return error_code(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException")


def cancellation_codes(exc: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction ('None' where the item was fine)."""
    reasons = exc.response.get("CancellationReasons") or []
    return [str(reason.get("Code", "None")) for reason in reasons]


def batch_write(client: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """batch_write_item with AWS's real limit (25) and a retry of unprocessed items."""
    if len(requests) > BATCH_WRITE_LIMIT:
        raise ValueError(f"at most {BATCH_WRITE_LIMIT} requests per batch_write_item")
    pending = {table: requests}
    for attempt in range(8):
        response = client.batch_write_item(RequestItems=pending)
        pending = response.get("UnprocessedItems") or {}
        if not pending:
            return
        _back_off(attempt)
    raise Throttled(f"DynamoDB left {len(pending[table])} writes unprocessed; retry")


def _back_off(attempt: int) -> None:
    """Wait before re-sending unprocessed items (AWS: they were throttled)."""
    time.sleep(random.uniform(0, 0.05 * 2**attempt))


BATCH_GET_LIMIT = 100
"""Keys per batch_get_item call (AWS's limit)."""


@dataclass(frozen=True)
class KeysToRead:
    """Keys of one table for :func:`batch_get`."""

    table: str
    keys: list[dict[str, Any]]
    consistent: bool = False


def batch_get(client: Any, reads: list[KeysToRead]) -> dict[str, list[dict[str, Any]]]:
    """Read keys of several tables in as few batch_get_item calls as AWS allows.

    Returns table → plain items found (in no particular order). Unprocessed keys are
    read again.
    """
    found: dict[str, list[dict[str, Any]]] = {read.table: [] for read in reads}
    wanted = [(read, key) for read in reads for key in read.keys]
    for start in range(0, len(wanted), BATCH_GET_LIMIT):
        pending: dict[str, Any] = {}
        for read, key in wanted[start : start + BATCH_GET_LIMIT]:
            entry = pending.setdefault(read.table, {"Keys": [], "ConsistentRead": read.consistent})
            entry["Keys"].append(to_item(key))
        for attempt in range(8):
            response = client.batch_get_item(RequestItems=pending)
            for table, items in response.get("Responses", {}).items():
                found[table].extend(from_item(item) for item in items)
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                break
            _back_off(attempt)
        else:
            raise Throttled("DynamoDB left reads unprocessed; retry")
    return found
