"""Lease items of a group's queue: reading them (all, one, or those around offsets), and
removing leases read settled."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from ...errors import BrokerError
from ...rules.group_state import GroupQueueState, Lease, LeaseSlot, is_inline, lease_slot
from ..dynamo import error_code, from_item, to_item
from .codec import as_read, lease_of, lease_unchanged
from .keys import item_key, lease_prefix, lease_prefix_end, lease_stream

log = logging.getLogger(__name__)
LOOKBACK_PAGE = 16
"""Lease items read per page when looking for the lease covering an offset."""


class LeaseItems:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def key(self, group: str, topic: str, queue: int, slot: LeaseSlot) -> dict[str, Any]:
        """The key of the lease item at ``slot`` (DynamoDB-typed)."""
        return to_item(item_key(group, lease_stream(topic, queue, slot)))

    def load_leases(self, state: GroupQueueState) -> None:
        """Read every open lease of the state's queue (consistent); its bounds become exact
        on the next ``refresh``."""
        if state.complete:
            return
        state.leases = {
            lease.lease_id: lease
            for lease in [
                *filter(None, [state.inline_lease()]),
                *self._query(
                    state.group,
                    "#s BETWEEN :lo AND :hi",
                    {
                        ":lo": lease_prefix(state.topic, state.queue),
                        ":hi": lease_prefix_end(state.topic, state.queue),
                    },
                ),
            ]
        }
        state.complete = True

    def load_lease(self, state: GroupQueueState, lease_id: str) -> Lease | None:
        """Read the lease ``lease_id`` names into ``state``; None if that lease is over.
        A lease stored on the summary was read with it."""
        slot = lease_slot(lease_id)
        if slot is None:
            return None
        if is_inline(lease_id):
            return state.leases.get(lease_id)
        item = self._client.get_item(
            TableName=self._table,
            Key=self.key(state.group, state.topic, state.queue, slot),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        lease = lease_of(from_item(item))
        state.leases.setdefault(lease.lease_id, lease)
        return lease if lease.lease_id == lease_id else None

    def leases_covering_each(
        self, state: GroupQueueState, offsets: list[int]
    ) -> dict[int, list[Lease]]:
        """For each of ``offsets``, the open leases of the state's queue whose range holds
        it: the one it was leased under, and the lease of its own if change_invisible moved
        it. The lease stored on the summary (as ``state`` read it), and two queries whatever
        their number: backwards from the lowest offset to the range lease at or below it,
        then forwards up to the highest."""
        group, topic, queue = state.group, state.topic, state.queue
        lo, hi = min(offsets), max(offsets)
        near: dict[LeaseSlot, Lease] = {}
        for lease in self._query(
            group,
            "#s BETWEEN :lo AND :hi",
            {":lo": lease_prefix(topic, queue), ":hi": lease_stream(topic, queue, (lo, True))},
            backwards=True,
        ):
            near[lease.slot] = lease
            if not lease.slot[1]:
                break  # range leases do not overlap: the first one at or below decides
        if hi > lo:
            for lease in self._query(
                group,
                "#s BETWEEN :lo AND :hi",
                {
                    ":lo": lease_stream(topic, queue, (lo, True)),
                    ":hi": lease_stream(topic, queue, (hi, True)),
                },
            ):
                near[lease.slot] = lease
        singles = {slot[0]: lease for slot, lease in near.items() if slot[1]}
        ranges = sorted((slot[0], lease) for slot, lease in near.items() if not slot[1])
        inline = state.inline_lease()
        if inline is not None:  # range leases do not overlap: it goes in start order
            bisect.insort(ranges, (inline.start, inline), key=lambda pair: pair[0])
        starts = [start for start, _ in ranges]
        found: dict[int, list[Lease]] = {}
        for offset in offsets:
            covering = [singles[offset]] if offset in singles else []
            below = bisect.bisect_right(starts, offset) - 1
            if below >= 0 and ranges[below][1].start <= offset < ranges[below][1].end:
                covering.append(ranges[below][1])
            found[offset] = covering
        return found

    def delete_settled(self, leases: list[tuple[dict[str, Any], Lease]]) -> None:
        """Remove leases read settled, each only if still as read (id and version); a
        failure only leaves them for the next lease read to remove (the save stands)."""
        try:
            for key, lease in leases:
                self._delete_if(key, lease_unchanged.format(p=""), as_read(lease))
        except (BrokerError, ClientError):
            log.warning("could not remove %d settled lease(s); they go next time", len(leases))

    def _delete_if(self, key: dict[str, Any], condition: str, values: dict[str, Any]) -> bool:
        """Delete one item if ``condition`` (on ``values``) holds; False if not."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=key,
                ConditionExpression=condition,
                ExpressionAttributeValues=to_item(values),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _query(
        self, group: str, condition: str, values: dict[str, Any], *, backwards: bool = False
    ) -> Iterator[Lease]:
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression=f"group_name = :g AND {condition}",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":g": group, **values}),
            ConsistentRead=True,
            ScanIndexForward=not backwards,
            **({"PaginationConfig": {"PageSize": LOOKBACK_PAGE}} if backwards else {}),
        ):
            yield from (lease_of(from_item(item)) for item in page["Items"])
