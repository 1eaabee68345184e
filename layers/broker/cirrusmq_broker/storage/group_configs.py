"""Per-group settings and dead-letter bookkeeping (GroupsTable items of the group).

``#config``: the group's ``max_delivery_attempts``, ``redelivery`` and dead-letter
destination (a topic its dead letters go to instead of ``dlq.<group>``, with the properties
they get there). ``#dlq``: the dead-letter floor (what a purge left behind) and one redrive
cursor per filter (``redrive_<key>``, the next DLQ offset that redrive still has to look
at). Their sort keys start with ``#``, which no topic stream does, and they carry no
``topic`` attribute (the by_topic index stays sparse).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import error_code, from_item, to_item
from .groups.keys import CONFIG_STREAM, DLQ_STREAM


@dataclass(frozen=True)
class DeadLetterMarks:
    floor: int = 0
    """Dead letters below this offset were purged."""
    cursors: dict[str, int] | None = None
    """Redrive filter key → next DLQ offset to look at."""

    def cursor(self, key: str) -> int:
        return max(self.floor, (self.cursors or {}).get(key, 0))


@dataclass(frozen=True)
class DeadLetterDestination:
    """Where a group's dead letters go instead of its dead-letter topic ``dlq.<group>``."""

    topic: str
    """A user topic: each dead letter is appended there as a message of its own."""
    properties: dict[str, str]
    """Properties each letter gets there (e.g. the queue it came from)."""


@dataclass(frozen=True)
class GroupSettings:
    max_delivery_attempts: int | None = None
    """None: never set (the default applies)."""
    dead_letter: DeadLetterDestination | None = None
    redelivery: str | None = None
    """How an expired lease comes back (rules/retries.py ``REDELIVERY_*``; None: the
    default)."""


class GroupConfigStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def group_exists(self, group: str) -> bool:
        """Whether the group has any item (state, subscription, settings)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="group_name = :g",
            ExpressionAttributeValues=to_item({":g": group}),
            Limit=1,
        )
        return bool(response["Items"])

    def settings(self, group: str) -> GroupSettings:
        """The group's settings as stored (one consistent read of its ``#config`` item)."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": CONFIG_STREAM}),
            ConsistentRead=True,
        ).get("Item")
        values = from_item(item) if item else {}
        attempts = values.get("max_delivery_attempts")
        destination = None
        if values.get("dead_letter_topic"):
            properties = values.get("dead_letter_properties") or {}
            destination = DeadLetterDestination(
                str(values["dead_letter_topic"]),
                {str(k): str(v) for k, v in properties.items()},
            )
        redelivery = values.get("redelivery")
        return GroupSettings(
            int(attempts) if attempts is not None else None,
            destination,
            str(redelivery) if redelivery is not None else None,
        )

    def max_delivery_attempts(self, group: str) -> int | None:
        return self.settings(group).max_delivery_attempts

    def set_redelivery(self, group: str, redelivery: str) -> None:
        self._client.update_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": CONFIG_STREAM}),
            UpdateExpression="SET redelivery = :r",
            ExpressionAttributeValues=to_item({":r": redelivery}),
        )

    def set_max_delivery_attempts(self, group: str, value: int) -> None:
        self._client.update_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": CONFIG_STREAM}),
            UpdateExpression="SET max_delivery_attempts = :m",
            ExpressionAttributeValues=to_item({":m": value}),
        )

    def set_dead_letter_destination(
        self, group: str, destination: DeadLetterDestination | None
    ) -> None:
        """Send the group's dead letters to ``destination`` (None: to ``dlq.<group>``)."""
        key = to_item({"group_name": group, "stream": CONFIG_STREAM})
        if destination is None:
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="REMOVE dead_letter_topic, dead_letter_properties",
            )
            return
        self._client.update_item(
            TableName=self._table,
            Key=key,
            UpdateExpression="SET dead_letter_topic = :t, dead_letter_properties = :p",
            ExpressionAttributeValues=to_item(
                {":t": destination.topic, ":p": dict(destination.properties)}
            ),
        )

    def dead_letter_marks(self, group: str) -> DeadLetterMarks:
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": DLQ_STREAM}),
            ConsistentRead=True,
        ).get("Item")
        return self.marks_from([from_item(item)] if item else [])

    @staticmethod
    def marks_from(items: list[dict[str, Any]]) -> DeadLetterMarks:
        """The marks in a plain ``#dlq`` item read elsewhere (no item: none)."""
        if not items:
            return DeadLetterMarks()
        values = items[0]
        cursors = {
            k.removeprefix("redrive_"): int(v)
            for k, v in values.items()
            if k.startswith("redrive_")
        }
        return DeadLetterMarks(int(values.get("purged_below", 0)), cursors)

    def advance_cursor(self, group: str, key: str, expected: int, to: int) -> bool:
        """Move redrive cursor ``key`` from ``expected`` (or below: never stored, or under the
        floor) to ``to``; False if another redrive moved it first."""
        name = f"redrive_{key}"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"group_name": group, "stream": DLQ_STREAM}),
                UpdateExpression="SET #c = :to",
                ConditionExpression="attribute_not_exists(#c) OR #c <= :expected",
                ExpressionAttributeNames={"#c": name},
                ExpressionAttributeValues=to_item({":to": to, ":expected": expected}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def not_purged_request(self, group: str, offset: int) -> dict[str, Any]:
        """A transaction item: no purge raised the dead-letter floor above ``offset``."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": to_item({"group_name": group, "stream": DLQ_STREAM}),
                "ConditionExpression": "attribute_not_exists(purged_below) OR purged_below <= :o",
                "ExpressionAttributeValues": to_item({":o": offset}),
            }
        }

    def raise_floor(self, group: str, floor: int) -> None:
        """Purge: dead letters below ``floor`` are no longer listed or redriven."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"group_name": group, "stream": DLQ_STREAM}),
                UpdateExpression="SET purged_below = :f",
                ConditionExpression="attribute_not_exists(purged_below) OR purged_below < :f",
                ExpressionAttributeValues=to_item({":f": floor}),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
