"""A group's subscription item per topic: the filter it consumes the topic with (its
expression and, for other filters than tags, its ``filter_type``)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ...rules.filters import TAG, Subscription
from ..dynamo import error_code, from_item, to_item
from .codec import not_stored_yet
from .keys import item_key, subscription_stream


class Subscriptions:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def subscribe(
        self, group: str, topic: str, subscription: Subscription, *, only_if_new: bool
    ) -> bool:
        """Record the group's filter on ``topic``; False if ``only_if_new`` and one exists."""
        typed = {} if subscription.filter_type == TAG else {"filter_type": subscription.filter_type}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(
                    {
                        **item_key(group, subscription_stream(topic)),
                        "topic": topic,
                        "filter": subscription.expression,
                        **typed,
                    }
                ),
                **({"ConditionExpression": not_stored_yet} if only_if_new else {}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def subscription(self, group: str, topic: str) -> Subscription | None:
        """The group's filter on ``topic``; None before its first receive."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item(item_key(group, subscription_stream(topic))),
            ConsistentRead=True,
        ).get("Item")
        return subscription_of(from_item(item)) if item else None


def subscription_of(values: dict[str, Any]) -> Subscription:
    """The subscription a stored item holds (an item without a type is a tag filter)."""
    return Subscription(values["filter"], values.get("filter_type", TAG))
