"""Consumer group state (GroupsTable): one item per (group, topic, queue), and one
subscription item per (group, topic) holding the group's filter on that topic.

Receive rewrites a state item with a version check (optimistic concurrency); ack is a
single conditional ``ADD`` of offsets to the acked set, so it never needs a read first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..group_state import GroupQueueState, Lease
from ..model import stream_id
from .dynamo import KeysToRead, batch_get, error_code, from_item, to_item

MAX_LEASE_CONDITIONS = 40
"""Leases checked inside one ack's condition; DynamoDB caps an expression at 4 KB."""

not_stored_yet = "attribute_not_exists(group_name)"
SUBSCRIPTION_SUFFIX = "#subscription"
unchanged_since_read = "version = :version"


@dataclass(frozen=True)
class AckRequest:
    """Offsets to ack in one state item, by the lease each was delivered under."""

    topic: str
    queue: int
    offsets_by_lease: dict[str, list[int]]


class GroupStateStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def load(self, group: str, topic: str, queues: Iterable[int]) -> dict[int, GroupQueueState]:
        """Consistent read of the states of ``queues`` (absent ones start fresh)."""
        wanted = list(queues)
        keys = [{"group_name": group, "stream": stream_id(topic, q)} for q in wanted]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return self.parse(group, topic, wanted, found[self._table])[0]

    @property
    def table(self) -> str:
        return self._table

    def to_read(self, group: str, topic: str, queues: list[int]) -> KeysToRead:
        """Keys of the states of ``queues`` and of the subscription, for a batched read."""
        keys = [{"group_name": group, "stream": stream_id(topic, q)} for q in queues]
        keys.append({"group_name": group, "stream": topic + SUBSCRIPTION_SUFFIX})
        return KeysToRead(self._table, keys)

    @staticmethod
    def parse(
        group: str, topic: str, queues: list[int], items: list[dict[str, Any]]
    ) -> tuple[dict[int, GroupQueueState], str | None]:
        """States (absent ones start fresh) and the subscribed filter from read items."""
        states = {q: GroupQueueState(group, topic, q) for q in queues}
        subscription = None
        for values in items:
            if values["stream"] == topic + SUBSCRIPTION_SUFFIX:
                subscription = values["filter"]
            elif values.get("topic") == topic and values.get("queue") in states:
                states[values["queue"]] = _state(values)
        return states, subscription

    def subscribe(self, group: str, topic: str, expression: str, *, only_if_new: bool) -> bool:
        """Record the group's filter on ``topic``; False if ``only_if_new`` and one exists."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(
                    {
                        "group_name": group,
                        "stream": topic + SUBSCRIPTION_SUFFIX,
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
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": topic + SUBSCRIPTION_SUFFIX}),
            ConsistentRead=True,
        ).get("Item")
        return from_item(item)["filter"] if item else None

    def load_one(self, group: str, topic: str, queue: int) -> GroupQueueState:
        return self.load(group, topic, [queue])[queue]

    def save(self, state: GroupQueueState) -> bool:
        """Write ``state`` if nobody changed it since it was read; False if somebody did."""
        condition, values = (
            (not_stored_yet, {})
            if state.version == 0
            else (unchanged_since_read, {":version": state.version})
        )
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(_values(state, version=state.version + 1)),
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": to_item(values)} if values else {}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        state.version += 1
        return True

    def ack(self, group: str, requests: list[AckRequest]) -> bool:
        """Add the offsets to the acked sets, all or nothing; False if any lease is stale.

        A lease is live while its entry exists; offsets below ``committed`` are settled
        already, so acking them again succeeds.
        """
        updates = []
        for request in requests:
            if len(request.offsets_by_lease) <= MAX_LEASE_CONDITIONS:
                updates.append(self._ack_update(group, request))
                continue
            # Too many leases for one condition: check them on a read, then update that version.
            state = self.load_one(group, request.topic, request.queue)
            if not all(
                state.holds(lease_id, max(offsets))
                for lease_id, offsets in request.offsets_by_lease.items()
            ):
                return False
            updates.append(self._ack_update(group, request, version=state.version))
        try:
            if len(updates) == 1:
                self._client.update_item(**updates[0])
            else:
                self._client.transact_write_items(TransactItems=[{"Update": u} for u in updates])
        except ClientError as exc:
            if error_code(exc) in (
                "ConditionalCheckFailedException",
                "TransactionCanceledException",
            ):
                return False
            raise
        return True

    def list_group(self, group: str) -> tuple[list[GroupQueueState], dict[str, str]]:
        """Every state of the group, and its subscriptions (topic → filter)."""
        states: list[GroupQueueState] = []
        subscriptions: dict[str, str] = {}
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="group_name = :g",
            ExpressionAttributeValues=to_item({":g": group}),
            ConsistentRead=True,
        ):
            for values in map(from_item, page["Items"]):
                if values["stream"].endswith(SUBSCRIPTION_SUFFIX):
                    subscriptions[values["topic"]] = values["filter"]
                else:
                    states.append(_state(values))
        return states, subscriptions

    def delete_topic_states(self, topic: str) -> int:
        """Delete every group's state on ``topic`` (used when a topic is purged)."""
        deleted = 0
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            IndexName="by_topic",
            KeyConditionExpression="topic = :t",
            ExpressionAttributeValues=to_item({":t": topic}),
        ):
            for item in page["Items"]:
                key = {k: item[k] for k in ("group_name", "stream")}
                self._client.delete_item(TableName=self._table, Key=key)
                deleted += 1
        return deleted

    def _ack_update(
        self, group: str, request: AckRequest, *, version: int | None = None
    ) -> dict[str, Any]:
        names: dict[str, str] = {}
        values: dict[str, Any] = {":one": 1}
        conditions = ["attribute_exists(group_name)"]
        offsets = {o for lease_offsets in request.offsets_by_lease.values() for o in lease_offsets}
        if version is not None:
            conditions.append(unchanged_since_read)
            values[":version"] = version
        else:
            for i, (lease_id, lease_offsets) in enumerate(sorted(request.offsets_by_lease.items())):
                names[f"#l{i}"] = lease_id
                values[f":m{i}"] = max(lease_offsets)
                conditions.append(f"(attribute_exists(leases.#l{i}) OR committed > :m{i})")
        values[":acked"] = offsets
        return {
            "TableName": self._table,
            "Key": to_item(
                {"group_name": group, "stream": stream_id(request.topic, request.queue)}
            ),
            "UpdateExpression": "ADD acked :acked, version :one",
            "ConditionExpression": " AND ".join(conditions),
            **({"ExpressionAttributeNames": names} if names else {}),
            "ExpressionAttributeValues": to_item(values),
        }


def _values(state: GroupQueueState, *, version: int) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": stream_id(state.topic, state.queue),
        "topic": state.topic,
        "queue": state.queue,
        "committed": state.committed,
        "cursor": state.cursor,
        "cursor_base": state.cursor_base,
        "version": version,
        "acked": set(state.acked) or None,
        "leases": {
            lease.lease_id: {
                "s": lease.start,
                "e": lease.end,
                "d": lease.deadline,
                "a": lease.attempt,
                **({"m": set(lease.moved)} if lease.moved else {}),
            }
            for lease in state.leases.values()
        },
    }


def _state(v: dict[str, Any]) -> GroupQueueState:
    return GroupQueueState(
        group=v["group_name"],
        topic=v["topic"],
        queue=v["queue"],
        committed=v["committed"],
        cursor=v["cursor"],
        cursor_base=v["cursor_base"],
        leases={
            lid: Lease(lid, raw["s"], raw["e"], raw["d"], raw["a"], frozenset(raw.get("m", ())))
            for lid, raw in v.get("leases", {}).items()
        },
        acked=set(v.get("acked", ())),
        version=v["version"],
    )
