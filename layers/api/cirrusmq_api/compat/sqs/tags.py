"""Queue tags (TagQueue, UntagQueue, ListQueueTags, CreateQueue's ``tags``) and the
permission actions (AddPermission, RemovePermission).

Tags are kept in the queue's attribute item under :data:`TAGS` (a JSON object; names with
``:`` are internal, never shown as attributes). SQS's limits: at most 50 tags, keys 1-128
characters, values up to 256.

AddPermission shares a queue with other AWS accounts; a CirrusMQ deployment has access keys,
not accounts, so no such grant can be made: it is refused (``UnsupportedOperation``) and a
key's permissions are given through the CirrusMQ API. RemovePermission then never finds the
label it names, as SQS answers for a label the queue's policy lacks.
"""

from __future__ import annotations

import json
from typing import Any

from .context import Call, list_param, str_param
from .errors import SqsError, invalid_parameter, missing_parameter
from .naming import QueueName

TAGS = "cirrusmq:Tags"
MAX_TAGS = 50
MAX_KEY_CHARS = 128
MAX_VALUE_CHARS = 256


def stored(attributes: dict[str, str]) -> dict[str, str]:
    """The tags kept in a queue's attribute item."""
    text = attributes.get(TAGS)
    return dict(json.loads(text)) if text else {}


def with_tags(attributes: dict[str, str], tags: dict[str, str]) -> dict[str, str]:
    """The attribute item holding ``tags`` (none: the entry is left out)."""
    kept = {k: v for k, v in attributes.items() if k != TAGS}
    return {**kept, TAGS: json.dumps(tags, sort_keys=True)} if tags else kept


def check(tags: object, queue: QueueName, *, present: dict[str, str]) -> dict[str, str]:
    """``tags`` checked against SQS's limits, merged over the ``present`` ones."""
    if not tags:
        raise missing_parameter("Tags")
    if not isinstance(tags, dict):
        raise invalid_parameter("Tags must be a map of keys to values.")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
            raise invalid_parameter(
                f"Tag keys must be between 1 and {MAX_KEY_CHARS} characters in length."
            )
        if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
            raise invalid_parameter(
                f"Tag values must be between 0 and {MAX_VALUE_CHARS} characters in length."
            )
    merged = {**present, **tags}
    if len(merged) > MAX_TAGS:
        raise invalid_parameter(f"Too many tags added for queue {queue.name}.")
    return merged


def tag_queue(call: Call, queue: QueueName, params: dict[str, Any]) -> dict[str, Any]:
    attributes = call.broker.sqs_queues.get(queue.group) or {}
    merged = check(params.get("Tags"), queue, present=stored(attributes))
    call.broker.sqs_queues.put(queue.group, with_tags(attributes, merged))
    return {}


def untag_queue(call: Call, queue: QueueName, params: dict[str, Any]) -> dict[str, Any]:
    keys = list_param(params, "TagKeys")
    if not keys or not all(1 <= len(k) <= MAX_KEY_CHARS for k in keys):
        raise invalid_parameter(
            f"Tag keys must be between 1 and {MAX_KEY_CHARS} characters in length."
        )
    attributes = call.broker.sqs_queues.get(queue.group) or {}
    tags = {k: v for k, v in stored(attributes).items() if k not in keys}
    call.broker.sqs_queues.put(queue.group, with_tags(attributes, tags))
    return {}


def list_queue_tags(call: Call, queue: QueueName) -> dict[str, Any]:
    tags = stored(call.broker.sqs_queues.get(queue.group) or {})
    return {"Tags": tags} if tags else {}


def add_permission(params: dict[str, Any]) -> dict[str, Any]:
    for name in ("Label", "AWSAccountIds", "Actions"):
        if not params.get(name):
            raise missing_parameter(name)
    raise SqsError(
        "UnsupportedOperation",
        "CirrusMQ grants access to access keys, not to AWS accounts: give the key a publish "
        "or subscribe permission through the CirrusMQ API.",
        query_code="AWS.SimpleQueueService.UnsupportedOperation",
    )


def remove_permission(params: dict[str, Any]) -> dict[str, Any]:
    label = str_param(params, "Label")
    raise invalid_parameter(
        f"Value {str(label)[:100]} for parameter Label is invalid. Reason: can't find label "
        "on existing policy."
    )
