"""What a move of leased messages (an expiry, a nack) writes to the group state: the
settle of what it forwarded, conditional on the lease as read, and the moved mark
(``#moved.<topic>#<queue>.<lease id>``, TTL) a lease it deletes leaves behind, naming the
offsets forwarded, which an ack of its handles reads (one batched read per ack)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from ...errors import StorageContended
from ...limits import MAX_INVISIBLE_SECONDS
from ...rules.group_state import GroupQueueState, Lease
from ..dynamo import KeysToRead, batch_get, lost_race, to_item, write_one
from .codec import (
    LeasePlace,
    as_read,
    inline_values,
    lease_unchanged,
    lease_values,
    removal,
)
from .keys import item_key, mark_stream

MOVED_MARK_SECONDS = 2 * MAX_INVISIBLE_SECONDS
"""How long after the moved lease's deadline its mark is kept (DynamoDB's TTL): past the
deadline of the lease it was moved out of (change_invisible), whose handles ask for it."""


class MoveSettles:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def settle_requests(
        self, state: GroupQueueState, before: Lease, after: Lease
    ) -> list[dict[str, Any]]:
        """Transaction items that store ``after`` (``before`` once a move forwarded or
        settled some of its offsets: :meth:`Lease.moved_on`) if the lease is still as read:
        the move's append carries them, so the move happens only if nothing (an ack, a
        change of invisible time, another move) changed the lease since it was read.

        A lease left with nothing unsettled is deleted; if a move forwarded some of its
        offsets, a moved mark of the lease (:meth:`moved_marks`) keeps which, so an ack of
        its handles (its own or, for a message change_invisible moved out, its parent's)
        still finds them moved on, not acked."""
        requests = [self.settle_request(state, before, after)]
        if not after.unsettled() and after.gone:
            requests.append(self.mark_request(state.group, state.topic, state.queue, after))
        return requests

    def settle_request(self, state: GroupQueueState, before: Lease, after: Lease) -> dict[str, Any]:
        """The lease's own item of :meth:`settle_requests`: a put of ``after``, or a delete
        if it has nothing unsettled, conditional on the lease as read. A lease stored on
        the summary is set there, or removed (its attributes only)."""
        place = LeasePlace.of(state.group, state.topic, state.queue, before.lease_id, before.slot)
        condition = {
            "ConditionExpression": place.condition(lease_unchanged),
            "ExpressionAttributeValues": to_item(as_read(before)),
        }
        body = {"TableName": self._table, "Key": place.key, **condition}
        if place.inline and not after.unsettled():
            return {"Update": removal(body)}
        if place.inline:
            values = inline_values(after)
            stored = {name: value for name, value in values.items() if value is not None}
            update = ", ".join(f"{name} = :{name}" for name in stored)
            empty = [name for name, value in values.items() if value is None]
            body["UpdateExpression"] = f"SET {update}" + (
                f" REMOVE {', '.join(empty)}" if empty else ""
            )
            body["ExpressionAttributeValues"] = body.get("ExpressionAttributeValues", {}) | to_item(
                {f":{name}": value for name, value in stored.items()}
            )
            return {"Update": body}
        if after.unsettled():
            item = to_item(lease_values(state, after))
            return {"Put": {"TableName": self._table, "Item": item, **condition}}
        return {"Delete": body}

    def mark_request(self, group: str, topic: str, queue: int, lease: Lease) -> dict[str, Any]:
        """A transaction item storing the moved mark of ``lease`` (deleted with its
        ``gone`` offsets)."""
        mark = {
            **item_key(group, mark_stream(topic, queue, lease.lease_id)),
            "gone": set(lease.gone),
            "expires_at": lease.deadline // 1000 + MOVED_MARK_SECONDS,
        }
        return {"Put": {"TableName": self._table, "Item": to_item(mark)}}

    def settle(self, state: GroupQueueState, before: Lease, after: Lease) -> bool:
        """:meth:`settle_requests` on their own (a move with nothing to append); False if
        the lease changed since it was read."""
        requests = self.settle_requests(state, before, after)
        try:
            if len(requests) > 1:
                self._client.transact_write_items(
                    TransactItems=requests, ClientRequestToken=uuid.uuid4().hex
                )
                return True
            write_one(self._client, requests[0])
        except ClientError as exc:
            if lost_race(exc):
                return False
            raise
        except StorageContended:  # a transaction held the item: read again
            return False
        return True

    def moved_marks(
        self, group: str, topic: str, queue: int, lease_ids: Iterable[str]
    ) -> dict[str, frozenset[int]]:
        """Lease id → the offsets a move forwarded from it, for the leases a move deleted
        (nack, expiry) within ``MOVED_MARK_SECONDS`` of their deadline: one batched read."""
        wanted = list(dict.fromkeys(lease_ids))
        if not wanted:
            return {}
        read = self.marks_to_read(group, topic, queue, wanted)
        return self.parse_marks(topic, queue, wanted, batch_get(self._client, [read]))

    def marks_to_read(
        self, group: str, topic: str, queue: int, lease_ids: Iterable[str]
    ) -> KeysToRead:
        """Keys of the moved marks of ``lease_ids``, for a batched read."""
        keys = [item_key(group, mark_stream(topic, queue, x)) for x in lease_ids]
        return KeysToRead(self._table, keys, consistent=True)

    def parse_marks(
        self, topic: str, queue: int, lease_ids: Iterable[str], found: dict[str, list[Any]]
    ) -> dict[str, frozenset[int]]:
        """:meth:`moved_marks` from a batched read's items (table → items)."""
        by_stream = {mark_stream(topic, queue, x): x for x in lease_ids}
        return {
            by_stream[item["stream"]]: frozenset(int(o) for o in item.get("gone", ()))
            for item in found.get(self._table, ())
            if item.get("stream") in by_stream
        }
