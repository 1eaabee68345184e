"""Whole groups and whole topics: every state of a group with its leases and
subscriptions (describe), and the deletion of every group's state on a purged topic.

Lease items carry no ``topic`` attribute: the by_topic index stays sparse (no index write
per lease); a topic's purge deletes them below each summary it finds there."""

from __future__ import annotations

from typing import Any

from ...rules.filters import Subscription
from ...rules.group_state import GroupQueueState, Lease
from ..dynamo import BATCH_WRITE_LIMIT, batch_write, from_item, to_item
from .codec import lease_of, state_of
from .keys import INTERNAL_MARK, LEASE_MARK, NOT_A_STREAM, SUBSCRIPTION_SUFFIX
from .subscriptions import subscription_of


class GroupScan:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def list_group(self, group: str) -> tuple[list[GroupQueueState], dict[str, Subscription]]:
        """Every state of the group with all its leases, and its subscriptions."""
        states: dict[str, GroupQueueState] = {}
        leases: list[tuple[str, Lease]] = []
        subscriptions: dict[str, Subscription] = {}
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="group_name = :g",
            ExpressionAttributeValues=to_item({":g": group}),
            ConsistentRead=True,
        ):
            for values in map(from_item, page["Items"]):
                stream = values["stream"]
                if stream.startswith(INTERNAL_MARK):  # settings, dead-letter and moved marks
                    continue
                if stream.startswith(NOT_A_STREAM):
                    continue  # the group's consumer registry (storage/consumer_registry.py)
                if stream.endswith(SUBSCRIPTION_SUFFIX):
                    subscriptions[values["topic"]] = subscription_of(values)
                elif LEASE_MARK in stream:
                    leases.append((stream.split(LEASE_MARK)[0], lease_of(values)))
                else:
                    states[stream] = state_of(values)
        for state in states.values():
            state.complete = True
        for stream, lease in leases:
            if stream in states:
                states[stream].leases[lease.lease_id] = lease
        return list(states.values()), subscriptions

    def delete_topic_states(self, topic: str) -> int:
        """Delete every group's state on ``topic``, leases first (used when a topic is purged)."""
        deleted = 0
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            IndexName="by_topic",
            KeyConditionExpression="topic = :t",
            ExpressionAttributeValues=to_item({":t": topic}),
        ):
            for item in page["Items"]:
                values = from_item(item)
                stream = values["stream"]
                if not stream.endswith(SUBSCRIPTION_SUFFIX):
                    deleted += self._delete_below(values["group_name"], stream + LEASE_MARK)
                key = {k: item[k] for k in ("group_name", "stream")}
                self._client.delete_item(TableName=self._table, Key=key)
                deleted += 1
        return deleted

    def _delete(self, keys: list[dict[str, Any]]) -> None:
        for start in range(0, len(keys), BATCH_WRITE_LIMIT):
            chunk = keys[start : start + BATCH_WRITE_LIMIT]
            if len(chunk) == 1:
                self._client.delete_item(TableName=self._table, Key=chunk[0])
            else:
                batch_write(
                    self._client, self._table, [{"DeleteRequest": {"Key": k}} for k in chunk]
                )

    def _delete_below(self, group: str, prefix: str) -> int:
        paginator = self._client.get_paginator("query")
        keys = [
            {k: item[k] for k in ("group_name", "stream")}
            for page in paginator.paginate(
                TableName=self._table,
                KeyConditionExpression="group_name = :g AND begins_with(#s, :p)",
                ExpressionAttributeNames={"#s": "stream"},
                ExpressionAttributeValues=to_item({":g": group, ":p": prefix}),
                ProjectionExpression="group_name, #s",
                ConsistentRead=True,
            )
            for item in page["Items"]
        ]
        self._delete(keys)
        return len(keys)
