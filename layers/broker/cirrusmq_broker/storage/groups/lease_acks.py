"""An ack of one lease's offsets: a conditional ``ADD`` to the lease item (or, when the ack
names everything delivered under the lease, one conditional delete), then the deletes of
what it left settled, each conditional on what the ``ADD`` returned. A lease stored on its
queue's summary gets the same writes there (codec.LeasePlace): the ``ADD`` to its
attributes, their removal for a delete."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ...rules.group_state import delivered_count, lease_slot, single_lease_id
from ..dynamo import error_code, from_item, to_item, write_one
from .codec import INLINE_PREFIX, LeasePlace, as_read, lease_of, lease_unchanged
from .leases import LeaseItems
from .move_settles import MoveSettles

BATCH_TRANSACTION_LIMIT = 100
"""Items one TransactWriteItems takes."""
NOT_PAST_DEADLINE = "#deadline > :now"
"""An ack within the visibility of the lease it names (SQS FIFO queues)."""
DEADLINE_NAME = {"#deadline": "deadline"}

still_held_by_step = (
    "{p}lease_id = :id AND {p}deadline > :now"
    " AND attribute_not_exists({p}moved) AND attribute_not_exists({p}gone)"
)
"""A lease an exactly-once step may ack: the same delivery, before its deadline, nothing of
it moved out (change_invisible) or on (a nack, an expiry's move)."""


@dataclass
class LeaseAck:
    """What an ack of one lease's offsets could not settle (the rest it did)."""

    stale: set[int] = field(default_factory=set)
    """Offsets a move forwarded before the ack (retry topic, dead letters), or moved out
    by change_invisible and redelivered since: not acked."""
    vanished: dict[int, str] = field(default_factory=dict)
    """Offsets moved out by change_invisible whose lease of its own (id given) is gone:
    acked by its own handle, or moved on (the caller tells which)."""


class LeaseAcks:
    def __init__(self, client: Any, table: str, leases: LeaseItems, moves: MoveSettles) -> None:
        self._client = client
        self._table = table
        self._leases = leases
        self._moves = moves

    def ack(
        self,
        group: str,
        topic: str,
        queue: int,
        lease_id: str,
        offsets: list[int],
        *,
        before_add: Callable[[], None] | None = None,
        alive_at: int | None = None,
    ) -> LeaseAck | None:
        """Add ``offsets`` to the lease's settled set; None if ``lease_id`` is not its id.

        An ack of every offset delivered under the lease is one conditional delete; any
        other runs ``before_add`` first, then one conditional ``ADD``, which returns the
        lease: offsets a move forwarded (``gone``) were not acked. An offset moved out by
        change_invisible is settled by deleting its lease of its own, conditional on that
        lease still being the one made from this delivery. A lease left with nothing
        unsettled is deleted, conditional on the version the ``ADD`` returned.

        ``alive_at`` (ms; SQS FIFO queues): every write is also conditional on the lease
        holding each offset not being past its deadline then (a message moved out by
        change_invisible: its lease of its own), so an ack through a handle whose
        visibility timeout passed settles nothing (None, as for another id).
        """
        slot = lease_slot(lease_id)
        if slot is None:
            return None
        place = LeasePlace.of(group, topic, queue, lease_id, slot)
        if offsets and delivered_count(lease_id) == len(set(offsets)):
            settled = self._settle_whole(place, lease_id, alive_at)
            if settled is not None:
                return LeaseAck() if settled else None
        if before_add is not None:
            before_add()
        condition, values, names = "{p}lease_id = :id", {":id": lease_id}, {}
        if alive_at is not None and offsets:  # each offset: its lease live, or moved out
            moved = " AND ".join(f"contains({{p}}moved, :m{n})" for n in range(len(offsets)))
            condition += f" AND ({NOT_PAST_DEADLINE} OR ({moved}))" if moved else ""
            values |= {":now": alive_at} | {f":m{n}": o for n, o in enumerate(offsets)}
            names = {k: place.name(v) for k, v in DEADLINE_NAME.items()}
        try:
            item = self._client.update_item(
                TableName=self._table,
                Key=place.key,
                UpdateExpression=_acked(place),
                ConditionExpression=place.condition(condition),
                ExpressionAttributeValues=to_item({":acked": set(offsets), ":one": 1, **values}),
                **({"ExpressionAttributeNames": names} if names else {}),
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        lease = lease_of(from_item(item), INLINE_PREFIX if place.inline else "")
        outcome = LeaseAck(stale=set(lease.gone & set(offsets)))
        singles = {
            offset: single_lease_id(lease_id, offset)
            for offset in sorted(lease.moved & set(offsets))
        }
        requests = [
            self._single_delete(group, topic, queue, offset, single, alive_at)
            for offset, single in singles.items()
        ]
        if not lease.unsettled():
            requests.append(place.request(self._table, lease_unchanged, as_read(lease), None))
            if lease.gone:  # a nack's handle acked later still finds its message moved on
                requests.append(self._moves.mark_request(group, topic, queue, lease))
        failed = self._delete_each(requests)
        for position, (offset, single) in enumerate(singles.items()):
            if position not in failed:
                continue
            if failed[position]:
                outcome.stale.add(offset)  # its lease of its own has another id: redelivered
            else:
                outcome.vanished[offset] = single
        return outcome

    def step_request(
        self, group: str, topic: str, queue: int, lease_id: str, offsets: list[int], now: int
    ) -> dict[str, Any] | None:
        """A transaction item acking ``offsets`` of the lease in an exactly-once step, on
        the condition ``still_held_by_step``: a delete when they are every offset delivered
        under the lease, else an ``ADD`` to its settled set (a lease it leaves settled is
        deleted later by :meth:`ack`). None for a lease id this broker never made."""
        slot = lease_slot(lease_id)
        if slot is None:
            return None
        place = LeasePlace.of(group, topic, queue, lease_id, slot)
        values: dict[str, Any] = {":id": lease_id, ":now": now}
        if offsets and delivered_count(lease_id) == len(set(offsets)):
            return place.request(self._table, still_held_by_step, values, None)
        values.update({":acked": set(offsets), ":one": 1})
        return {
            "Update": {
                "TableName": self._table,
                "Key": place.key,
                "ConditionExpression": place.condition(still_held_by_step),
                "UpdateExpression": _acked(place),
                "ExpressionAttributeValues": to_item(values),
            }
        }

    def _single_delete(
        self, group: str, topic: str, queue: int, offset: int, single: str, alive_at: int | None
    ) -> dict[str, Any]:
        """The conditional delete of the lease of its own of ``offset`` (id ``single``)."""
        place = LeasePlace(self._leases.key(group, topic, queue, (offset, True)), inline=False)
        if alive_at is None:
            return place.request(self._table, "lease_id = :id", {":id": single}, None)
        return place.request(
            self._table,
            f"lease_id = :id AND {NOT_PAST_DEADLINE}",
            {":id": single, ":now": alive_at},
            DEADLINE_NAME,
        )

    def _delete_each(self, requests: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Run the conditional deletes (and puts) ``requests``; position → the item as found
        (empty if absent) of those whose condition failed. One transaction (a single delete
        on its own); a cancelled one says which conditions failed, and the rest go again in
        one more: calls per ack, not per delete."""
        failed: dict[int, dict[str, Any]] = {}
        left = list(range(len(requests)))
        while left:
            if len(left) == 1:
                failed.update(self._delete_one(requests[left[0]], left[0]))
                return failed
            chunk = left[:BATCH_TRANSACTION_LIMIT]
            reasons = self._transact_deletes([requests[i] for i in chunk])
            if reasons is None:
                left = left[len(chunk) :]
                continue
            refused = {
                chunk[n]: from_item(reason.get("Item") or {})
                for n, reason in enumerate(reasons)
                if reason.get("Code") == "ConditionalCheckFailed"
            }
            if not refused:  # cancelled for another reason (a conflict): one by one
                for i in chunk:
                    failed.update(self._delete_one(requests[i], i))
                left = left[len(chunk) :]
                continue
            failed.update(refused)
            left = [i for i in left if i not in refused]
        return failed

    def _transact_deletes(self, items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Run the deletes ``items`` as one transaction: None if done, else the
        cancellation reason of each item (the item as found when its condition failed)."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {kind: {**body, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
                    for item in items
                    for kind, body in item.items()
                ],
                ClientRequestToken=uuid.uuid4().hex,
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return list(exc.response.get("CancellationReasons") or [])
            raise
        return None

    def _delete_one(self, request: dict[str, Any], position: int) -> dict[int, dict[str, Any]]:
        """One conditional delete: {position: item as found (empty if absent)} if its
        condition failed, else nothing."""
        try:
            write_one(self._client, request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return {position: from_item(exc.response.get("Item") or {})}
        return {}

    def settle_whole(
        self, group: str, leases: list[tuple[str, int, str]], *, alive_at: int | None = None
    ) -> set[tuple[str, int, str]]:
        """Delete the leases (topic, queue, lease id) whose ack names everything delivered
        under them, each on :meth:`_settle_whole`'s condition, in one transaction per 100
        (an SQS FIFO delete of many groups' messages: one lease per group). Returns those
        deleted; the others are left to :meth:`ack`.

        A transaction may write an item once, and two deliveries of one FIFO lease (a
        redelivery in place) share its item: only the first named of them goes in, the
        rest are left to :meth:`ack` (at most one of them is the item's current id)."""
        keys, places, items = [], [], set()
        for topic, queue, lease_id in leases:
            slot = lease_slot(lease_id)
            if slot is None:
                continue
            place = LeasePlace.of(group, topic, queue, lease_id, slot)
            item = (topic, queue, None if place.inline else slot)  # None: the summary
            if item not in items:
                items.add(item)
                keys.append((topic, queue, lease_id))
                places.append(place)
        requests = [
            self._whole_delete(place, lease_id, alive_at)
            for place, (_, _, lease_id) in zip(places, keys, strict=True)
        ]
        failed = self._delete_each(requests) if requests else {}
        return {k for n, k in enumerate(keys) if n not in failed}

    def _whole_delete(
        self, place: LeasePlace, lease_id: str, alive_at: int | None
    ) -> dict[str, Any]:
        """The conditional delete of a lease whose ack names everything delivered under it:
        it still has this id, nothing was moved out of it or on, and (``alive_at``) it is
        not past its deadline."""
        condition = (
            "{p}lease_id = :id AND attribute_not_exists({p}moved) AND attribute_not_exists({p}gone)"
        )
        values: dict[str, Any] = {":id": lease_id}
        if alive_at is None:
            return place.request(self._table, condition, values, None)
        values[":now"] = alive_at
        return place.request(
            self._table, f"{condition} AND {NOT_PAST_DEADLINE}", values, DEADLINE_NAME
        )

    def _settle_whole(
        self, place: LeasePlace, lease_id: str, alive_at: int | None = None
    ) -> bool | None:
        """Delete the lease: one small conditional delete instead of an ``ADD`` of every
        offset and then a delete. False if the lease no longer has this id (as a failed
        ``ADD`` would say); None if it has but a message was moved out of it
        (change_invisible) or on (a nack): take the ``ADD`` path.

        The caller acks as many distinct offsets of the lease as were delivered under its
        id (signed handles: each one such an offset), so none is left unsettled, provided
        the lease still has that id and nothing was moved out of it or on.
        ``alive_at``: and it is not past its deadline (else None: the ``ADD`` path sorts
        it out).
        """
        failed = self._delete_one(self._whole_delete(place, lease_id, alive_at), 0)
        if not failed:
            return True
        return None if failed[0].get(place.name("lease_id")) == lease_id else False


def _acked(place: LeasePlace) -> str:
    """The update expression adding ``:acked`` to the lease's settled offsets and 1 to its
    version."""
    return f"ADD {place.name('acked')} :acked, {place.name('v')} :one"
