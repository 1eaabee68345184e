"""A group's consumer registry and queue-lock releases (GroupsTable).

One item per group (sort key ``.consumers``: topic names have no dot, so it never collides
with a queue's state): a map client id → registration, a version for optimistic writes, and
``expires_at`` (seconds) = when its last member expires, for DynamoDB's TTL. One item keeps
the hot path free of queries: a receive reads it in the batch that reads the queues' heads
and states (``to_read``/``parse``); a heartbeat is one read and one conditional write.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..rules.membership import Member, Membership, RegistryTooLarge
from .dynamo import KeysToRead, batch_get, error_code, from_item, to_item
from .groups.keys import REGISTRY_STREAM, summary_stream


class ConsumerRegistry:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def key(self, group: str) -> dict[str, Any]:
        return {"group_name": group, "stream": REGISTRY_STREAM}

    def to_read(self, group: str) -> KeysToRead:
        return KeysToRead(self._table, [self.key(group)])

    @staticmethod
    def parse(group: str, items: list[dict[str, Any]]) -> Membership:
        """The registry among read items of the table (an empty one if absent)."""
        for values in items:
            if values.get("group_name") == group and values.get("stream") == REGISTRY_STREAM:
                return _membership(values)
        return Membership(group)

    def load(self, group: str) -> Membership:
        item = self._client.get_item(
            TableName=self._table, Key=to_item(self.key(group)), ConsistentRead=True
        ).get("Item")
        return _membership(from_item(item)) if item else Membership(group)

    def save(self, membership: Membership) -> bool:
        """Write the registry if nobody changed it since it was read; False if somebody did."""
        values = {
            **self.key(membership.group),
            "members": {cid: _member_values(m) for cid, m in membership.members.items()},
            "version": membership.version + 1,
            "expires_at": membership.expires_at() // 1000 + 1,
        }
        if membership.version == 0:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(version)"}
        else:
            condition = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": to_item({":v": membership.version}),
            }
        try:
            self._client.put_item(TableName=self._table, Item=to_item(values), **condition)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            if error_code(exc) == "ValidationException" and "size" in str(exc).lower():
                raise RegistryTooLarge(  # the estimate missed: still a 4xx, nothing stored
                    f"the registrations of group {membership.group!r} exceed an item's size"
                ) from exc
            raise
        membership.version += 1
        return True

    def locked_queues(self, group: str, topic: str, queues: int, client_id: str) -> list[int]:
        """The queues of ``topic`` whose state names ``client_id`` as lock owner (batched
        reads of the queues' summaries: a deregistration writes only where it holds a lock)."""
        keys = [{"group_name": group, "stream": summary_stream(topic, q)} for q in range(queues)]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        held = []
        for values in found[self._table]:
            if values.get("lock_owner") == client_id:
                held.append(int(str(values["stream"]).rsplit("#", 1)[1]))
        return sorted(held)

    def release_lock(self, group: str, topic: str, queue: int, client_id: str) -> bool:
        """Clear ``client_id``'s lock on a queue's state (one conditional write); whether it
        held it. The version moves, so a receive that read the lock before retries."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"group_name": group, "stream": summary_stream(topic, queue)}),
                UpdateExpression="REMOVE lock_owner, lock_expiry ADD version :one",
                ConditionExpression="lock_owner = :c",
                ExpressionAttributeValues=to_item({":c": client_id, ":one": 1}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _member_values(member: Member) -> dict[str, Any]:
    return {
        "topics": member.topics,
        "orderly": member.orderly,
        "last_heartbeat": member.last_heartbeat,
        "expires_at": member.expires_at,
        **({"access_key": member.access_key} if member.access_key is not None else {}),
    }


def _membership(values: dict[str, Any]) -> Membership:
    members = {
        cid: Member(
            client_id=cid,
            topics=dict(v.get("topics") or {}),
            orderly=bool(v.get("orderly")),
            last_heartbeat=int(v["last_heartbeat"]),
            expires_at=int(v["expires_at"]),
            access_key=v.get("access_key"),
        )
        for cid, v in (values.get("members") or {}).items()
    }
    return Membership(values["group_name"], members, int(values.get("version", 0)))
