"""Topic definitions (TopicsTable: one item per topic name)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..errors import TopicAlreadyExists, TopicBeingDeleted
from ..model import MessageType, Topic, TopicStatus
from .dynamo import cancellation_codes, error_code, from_item, to_item
from .queue_heads import QueueHeads

not_yet_created = "attribute_not_exists(topic)"
still_active = "attribute_exists(topic) AND #status = :active"
still_deleting = "#status = :deleting AND created_timestamp = :created"


class TopicStore:
    """Creates, reads, lists and retires topic items."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def create(self, topic: Topic, *, heads: QueueHeads | None = None) -> None:
        """Store a new topic; TopicAlreadyExists / TopicBeingDeleted if the name is taken.

        With ``heads``, the topic's queue heads are reopened in the same transaction: a
        name deleted before keeps its heads (closed by the delete), so the new topic's
        offsets go on from the old one's and never repeat (a position kept by a consumer
        of the old topic skips nothing of the new one). Internal topics, which are never
        deleted, are created without it (one put)."""
        if heads is None:
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=to_item(_to_values(topic)),
                    ConditionExpression=not_yet_created,
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                self._name_taken(topic.name, exc)
            return
        put = {
            "Put": {
                "TableName": self._table,
                "Item": to_item(_to_values(topic)),
                "ConditionExpression": not_yet_created,
            }
        }
        reopen = [heads.reopen_request(topic.name, q) for q in range(topic.queues)]
        try:
            self._client.transact_write_items(TransactItems=[put, *reopen])
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and cancellation_codes(exc)[
                :1
            ] == ["ConditionalCheckFailed"]:
                self._name_taken(topic.name, exc)
            raise

    def _name_taken(self, name: str, exc: ClientError) -> None:
        old = self.get(name, consistent=True)
        if old is not None and old.status is TopicStatus.DELETING:
            raise TopicBeingDeleted(
                f"topic {name!r} is being deleted; create it again in a minute"
            ) from exc
        raise TopicAlreadyExists(f"topic {name!r} already exists") from exc

    def get(self, name: str, *, consistent: bool = False) -> Topic | None:
        """The topic, whatever its status; None if there is no such item."""
        item = self._client.get_item(
            TableName=self._table, Key=to_item({"topic": name}), ConsistentRead=consistent
        ).get("Item")
        return _from_values(from_item(item)) if item else None

    def list(self) -> list[Topic]:
        """Every topic item (any status), sorted by name."""
        topics: list[Topic] = []
        for page in self._client.get_paginator("scan").paginate(TableName=self._table):
            topics.extend(_from_values(from_item(item)) for item in page["Items"])
        return sorted(topics, key=lambda t: t.name)

    def set_trace(self, name: str, trace: bool) -> Topic | None:
        """Turn message trace on or off for the active topic ``name``; the topic as it is
        now, or None if there is no active topic of that name."""
        return self._set(name, "trace", trace)

    def set_retention(self, name: str, retention_hours: int) -> Topic | None:
        """Change how long the active topic ``name`` keeps the messages stored from now on;
        the topic as it is now, or None if there is no active topic of that name."""
        return self._set(name, "retention_hours", retention_hours)

    def _set(self, name: str, field: str, value: object) -> Topic | None:
        try:
            item = self._client.update_item(
                TableName=self._table,
                Key=to_item({"topic": name}),
                UpdateExpression="SET #field = :value",
                ConditionExpression=still_active,
                ExpressionAttributeNames={"#status": "status", "#field": field},
                ExpressionAttributeValues=to_item(
                    {":value": value, ":active": TopicStatus.ACTIVE.value}
                ),
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return None
        return _from_values(from_item(item))

    def retire(self, name: str, *, now: int, heads: QueueHeads) -> bool:
        """Mark an active topic deleting and close its queues' heads, atomically.

        Appends after this are refused (their head is closed), so no send is acknowledged
        once the delete is. False if the topic was not active.
        """
        topic = self.get(name, consistent=True)
        if topic is None or topic.status is not TopicStatus.ACTIVE:
            return False
        retire = {
            "Update": {
                "TableName": self._table,
                "Key": to_item({"topic": name}),
                "UpdateExpression": "SET #status = :deleting, deleted_timestamp = :now",
                "ConditionExpression": still_active + " AND created_timestamp = :created",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": to_item(
                    {
                        ":deleting": TopicStatus.DELETING.value,
                        ":active": TopicStatus.ACTIVE.value,
                        ":now": now,
                        ":created": topic.created_timestamp,
                    }
                ),
            }
        }
        closes = [heads.close_request(name, q) for q in range(topic.queues)]
        try:
            self._client.transact_write_items(TransactItems=[retire, *closes])
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and cancellation_codes(exc)[
                :1
            ] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    def remove(self, name: str, *, created_timestamp: int) -> bool:
        """Delete the item of the deleted topic created at ``created_timestamp`` (after
        its data was purged); False if the item is gone or is another incarnation's (a
        topic created again under the name)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=to_item({"topic": name}),
                ConditionExpression=still_deleting,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_item(
                    {":deleting": TopicStatus.DELETING.value, ":created": created_timestamp}
                ),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True


def _to_values(topic: Topic) -> dict[str, Any]:
    return {
        "topic": topic.name,
        "queues": topic.queues,
        "message_type": topic.message_type.value,
        "retention_hours": topic.retention_hours,
        "created_timestamp": topic.created_timestamp,
        "status": topic.status.value,
        "deleted_timestamp": topic.deleted_timestamp,
        "trace": topic.trace,
    }


def _from_values(values: dict[str, Any]) -> Topic:
    return Topic(
        name=values["topic"],
        queues=values["queues"],
        message_type=MessageType(values["message_type"]),
        retention_hours=values["retention_hours"],
        created_timestamp=values["created_timestamp"],
        status=TopicStatus(values.get("status", TopicStatus.ACTIVE.value)),
        deleted_timestamp=values.get("deleted_timestamp"),
        trace=bool(values.get("trace", False)),
    )
