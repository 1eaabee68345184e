"""SQS queue attributes: which may be set, their ranges and defaults."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cirrusmq_broker import limits

from .context import as_integer
from .errors import SqsError, invalid_parameter

DEFAULTS: dict[str, str] = {
    "VisibilityTimeout": "30",
    "DelaySeconds": "0",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "MaximumMessageSize": "1048576",
    "SqsManagedSseEnabled": "true",
}
FIFO_DEFAULTS = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
FIFO_ONLY = ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
"""Attributes a standard queue does not know (SQS: InvalidAttributeName)."""
_RANGES: dict[str, tuple[int, int]] = {
    "VisibilityTimeout": (0, limits.MAX_INVISIBLE_SECONDS),
    "DelaySeconds": (0, 900),
    "MessageRetentionPeriod": (60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, limits.MAX_WAIT_SECONDS),
    "MaximumMessageSize": (1024, 1_048_576),
    "KmsDataKeyReusePeriodSeconds": (60, 86_400),
}
_BOOLEANS = ("FifoQueue", "ContentBasedDeduplication", "SqsManagedSseEnabled")
_KEPT = ("Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId")
"""Accepted and given back as set (the ones CirrusMQ acts on are read where they matter);
set to "" they are removed, as in SQS."""
MAX_KEPT_BYTES = 8_192
"""The most a kept value may hold: SQS's quota of a queue policy's size."""
KMS_ONLY = ("KmsDataKeyReusePeriodSeconds",)
"""Shown only while the queue names a ``KmsMasterKeyId`` (SQS's KMS encryption)."""
DEDUP_SCOPE_AT_CREATION = "cirrusmq:DeduplicationScope"
"""The ``DeduplicationScope`` a FIFO queue was created with: SQS keeps deduplicating in it
when the attribute is changed later."""
SOURCES = "cirrusmq:DeadLetterSources"
"""Kept in a dead-letter queue's item: the source queues whose RedrivePolicy names it
(space-separated); never shown as an attribute (names with ``:`` are internal)."""
PURGED = "cirrusmq:PurgedAt"
"""Kept in a queue's item: the time (ms) of its last PurgeQueue, one write whatever the
queue holds. On a FIFO queue it is part of each deduplication key (SendMessage): the
deduplication ids start afresh. A delayed message sent before it is deleted when a receive
meets it (ReceiveMessage)."""
READ_ONLY = (
    "QueueArn",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
)


def check(attributes: object, *, fifo: bool, creating: bool) -> dict[str, str]:
    """Validated settable attributes, as SQS's strings."""
    attributes = {} if attributes is None else attributes
    if not isinstance(attributes, dict):
        raise invalid_parameter("Attributes must be a map of names to values.")
    checked: dict[str, str] = {}
    for name, value in attributes.items():
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if name in _RANGES:
            low, high = _RANGES[name]
            number = as_integer(text) if text is not None else None
            if number is None or not low <= number <= high:
                raise invalid_value(name)
            checked[name] = str(number)
        elif name in _BOOLEANS:
            if text is None or text.lower() not in ("true", "false"):
                raise invalid_value(name)
            checked[name] = text.lower()
        elif name in _CHOICES:
            if text not in _CHOICES[name]:
                raise invalid_value(name)
            checked[name] = text
        elif name in _KEPT:
            if text is None:
                raise invalid_value(name)
            checked[name] = text
        else:
            raise unknown_attribute(name)
    _check_queue_type(checked, fifo=fifo, creating=creating)
    if "RedrivePolicy" in checked:
        redrive_policy(checked["RedrivePolicy"])
    for name in _KEPT:
        if len(checked.get(name, "").encode()) > MAX_KEPT_BYTES:
            raise invalid_value(name)
    return checked


def _check_queue_type(checked: dict[str, str], *, fifo: bool, creating: bool) -> None:
    """SQS's rules on ``FifoQueue`` and the FIFO-only attributes: a standard queue knows
    neither (creating one, ``FifoQueue`` true names a FIFO queue without ``.fifo``, and
    ``DeduplicationScope`` / ``FifoThroughputLimit`` need a FIFO queue); a FIFO queue is
    created with ``FifoQueue`` true and keeps it."""
    kind = checked.get("FifoQueue")
    if not fifo:
        if creating and kind == "true":
            raise invalid_parameter(
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, "
                "or underscores, must end with .fifo suffix."
            )
        if kind is not None:
            raise unknown_attribute("FifoQueue")
        for name in FIFO_ONLY:
            if name in checked:
                if creating and name != "ContentBasedDeduplication":
                    raise SqsError(
                        "InvalidAttributeName",
                        f"You can specify the {name} only when FifoQueue is set to true.",
                    )
                raise unknown_attribute(name)
        return
    if creating and kind != "true":
        raise invalid_parameter(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
            "underscores, must end with .fifo suffix."
        )
    if not creating and kind == "false":
        raise invalid_value("FifoQueue", "Reason: Modifying queue type is not supported.")


def invalid_value(name: str, reason: str = "") -> SqsError:
    text = f"Invalid value for the parameter {name[:256]}."
    return SqsError("InvalidAttributeValue", f"{text} {reason}" if reason else text)


def unknown_attribute(name: object) -> SqsError:
    return SqsError("InvalidAttributeName", f"Unknown Attribute {str(name)[:256]}.")


def redrive_policy(text: str) -> tuple[str, int] | None:
    """The dead-letter queue ARN and maxReceiveCount of a RedrivePolicy ("" clears it)."""
    if not text:
        return None
    try:
        policy = json.loads(text)
        arn = policy["deadLetterTargetArn"]
        count = as_integer(policy["maxReceiveCount"])
        if count is None:
            raise ValueError
    except (ValueError, KeyError, TypeError, RecursionError):  # nested past the parser
        raise invalid_parameter(
            "Value for parameter RedrivePolicy is invalid. Reason: Redrive policy is not a "
            "valid JSON map with deadLetterTargetArn and maxReceiveCount."
        ) from None
    if not isinstance(arn, str) or not 1 <= count <= 1000:
        raise invalid_parameter(
            "Value for parameter RedrivePolicy is invalid. Reason: maxReceiveCount must be 1-1000."
        )
    return arn, count


def updated(previous: Mapping[str, str], changes: Mapping[str, str]) -> dict[str, str]:
    """A queue's stored attributes after ``changes``: an attribute of :data:`_KEPT` set to ""
    is removed; a ``KmsMasterKeyId`` turns SQS-managed encryption off (SQS reports
    ``SqsManagedSseEnabled`` "false" from then on, as it does)."""
    merged = {**previous, **changes}
    if changes.get("KmsMasterKeyId") and "SqsManagedSseEnabled" not in changes:
        merged["SqsManagedSseEnabled"] = "false"
    return {k: v for k, v in merged.items() if not (k in _KEPT and v == "")}


def dedup_scope(attributes: Mapping[str, str]) -> str:
    """The scope a FIFO queue deduplicates in: the one it was created with (a queue created
    before that was kept: its ``DeduplicationScope``)."""
    return attributes.get(DEDUP_SCOPE_AT_CREATION) or attributes.get("DeduplicationScope", "queue")


def effective(stored: Mapping[str, str] | None, *, fifo: bool) -> dict[str, str]:
    """The queue's attributes: the stored ones over the defaults."""
    return {**DEFAULTS, **(FIFO_DEFAULTS if fifo else {}), **(stored or {})}


def shown(attributes: Mapping[str, str]) -> dict[str, str]:
    """The attributes a client sees (no internal ones; the KMS settings with a key)."""
    kms = bool(attributes.get("KmsMasterKeyId"))
    return {
        k: v
        for k, v in attributes.items()
        if ":" not in k and (kms or k not in KMS_ONLY) and not (k in _KEPT and v == "")
    }


def sources(attributes: Mapping[str, str]) -> list[str]:
    """The source queues of a dead-letter queue."""
    return [name for name in attributes.get(SOURCES, "").split(" ") if name]


def retention_hours(attributes: Mapping[str, str]) -> int:
    seconds = int(attributes.get("MessageRetentionPeriod", DEFAULTS["MessageRetentionPeriod"]))
    return max(limits.MIN_RETENTION_HOURS, math.ceil(seconds / 3600))


def conflicts(stored: Mapping[str, Any], wanted: Mapping[str, str]) -> list[str]:
    """Attributes a repeated CreateQueue asks with another value than the queue has."""
    return [name for name, value in wanted.items() if stored.get(name, "") != value]
