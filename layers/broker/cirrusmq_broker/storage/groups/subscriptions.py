"""A group's subscription item per topic: the filter it consumes the topic with."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..dynamo import error_code, from_item, to_item
from .codec import not_stored_yet
from .keys import item_key, subscription_stream


class Subscriptions:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def subscribe(self, group: str, topic: str, expression: str, *, only_if_new: bool) -> bool:
        """Record the group's filter on ``topic``; False if ``only_if_new`` and one exists."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(
                    {
                        **item_key(group, subscription_stream(topic)),
                        "topic": topic,
                        "filter": expression,
                    }
                ),
                **({"ConditionExpression": not_stored_yet} if only_if_new else {}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def subscription(self, group: str, topic: str) -> str | None:
        """The group's filter on ``topic``; None before its first receive."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item(item_key(group, subscription_stream(topic))),
            ConsistentRead=True,
        ).get("Item")
        return from_item(item)["filter"] if item else None
