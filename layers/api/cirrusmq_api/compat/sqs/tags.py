"""Queue tags (TagQueue, UntagQueue, ListQueueTags, CreateQueue's ``tags``).

Tags are kept in the queue's attribute item under :data:`TAGS` (a JSON object; names with
``:`` are internal, never shown as attributes). SQS's limits: at most 50 tags, keys 1-128
characters, values up to 256.
"""

from __future__ import annotations

import json
from typing import Any

from .context import Call, list_param
from .errors import invalid_parameter, missing_parameter
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
    def change(attributes: dict[str, str] | None) -> dict[str, str]:
        merged = check(params.get("Tags"), queue, present=stored(attributes or {}))
        return with_tags(attributes or {}, merged)

    call.broker.sqs_queues.update(queue.group, change)
    return {}


def untag_queue(call: Call, queue: QueueName, params: dict[str, Any]) -> dict[str, Any]:
    keys = list_param(params, "TagKeys")
    if not keys or not all(1 <= len(k) <= MAX_KEY_CHARS for k in keys):
        raise invalid_parameter(
            f"Tag keys must be between 1 and {MAX_KEY_CHARS} characters in length."
        )

    def change(attributes: dict[str, str] | None) -> dict[str, str]:
        tags = {k: v for k, v in stored(attributes or {}).items() if k not in keys}
        return with_tags(attributes or {}, tags)

    call.broker.sqs_queues.update(queue.group, change)
    return {}


def list_queue_tags(call: Call, queue: QueueName) -> dict[str, Any]:
    tags = stored(call.broker.sqs_queues.get(queue.group) or {})
    return {"Tags": tags} if tags else {}
