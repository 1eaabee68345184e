"""Consumer group state (GroupsTable), per (group, topic, queue): a small summary item
(``<topic>#<queue>``) and one item per open lease (``<topic>#<queue>#L<start>``, ``m`` appended
for a message moved out by change_invisible); and one subscription item per (group, topic)
holding the group's filter on that topic.

Every item is small, so a write costs the same whatever is in flight. A receive writes the
summary (version check, optimistic concurrency) and the leases it creates or changes in one
transaction; an ack is a conditional ``ADD`` to one lease item, which is deleted once settled
(an ack of everything delivered under a lease: one conditional delete). A move of leased
messages (expiry, nack) settles the lease in its append's transaction, conditional on the
lease's id and version (``settle_requests``); a lease deleted with messages moved on leaves a
small moved mark (``#moved.<topic>#<queue>.<lease id>``, TTL) naming them, which an ack of
its handles reads (one batched read per ack). Every lease delete and put is conditional on
the lease's id and version as read (versions restart at 1 in a new lease at the same slot).
Lease items carry no ``topic`` attribute: the by_topic index stays sparse (no index write
per lease); a topic's purge deletes them below each summary it finds there.
"""

from __future__ import annotations

import bisect
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from ..errors import BrokerError, StorageContended
from ..limits import MAX_INVISIBLE_SECONDS
from ..model import stream_id
from ..rules.group_state import (
    GroupQueueState,
    Lease,
    LeaseSlot,
    delivered_count,
    lease_slot,
    single_lease_id,
)
from .dynamo import (
    BATCH_WRITE_LIMIT,
    KeysToRead,
    batch_get,
    batch_write,
    error_code,
    from_item,
    to_item,
)

log = logging.getLogger(__name__)
not_stored_yet = "attribute_not_exists(group_name)"
SUBSCRIPTION_SUFFIX = "#subscription"
LEASE_MARK = "#L"
unchanged_since_read = "version = :version"
lease_unchanged = "lease_id = :id AND v = :v"
"""A lease as read: its id too, as versions restart at 1 in a new lease at the same slot
(after an offset reset)."""
NOT_A_STREAM = "."
"""Items of a group whose sort key starts with this are not queue states (topic names have no
dot): e.g. the consumer registry."""
MOVED_MARK = "#moved."
"""Sort-key prefix of a moved mark: the offsets a move forwarded from a lease it deleted.
Like other items starting with ``#``, not a queue state."""
MOVED_MARK_SECONDS = 2 * MAX_INVISIBLE_SECONDS
"""How long after the moved lease's deadline its mark is kept (DynamoDB's TTL): past the
deadline of the lease it was moved out of (change_invisible), whose handles ask for it."""
BATCH_TRANSACTION_LIMIT = 100
"""Items one TransactWriteItems takes."""
LOOKBACK_PAGE = 16
"""Lease items read per page when looking for the lease covering an offset."""


@dataclass
class LeaseAck:
    """What an ack of one lease's offsets could not settle (the rest it did)."""

    stale: set[int] = field(default_factory=set)
    """Offsets a move forwarded before the ack (retry topic, dead letters), or moved out
    by change_invisible and redelivered since: not acked."""
    vanished: dict[int, str] = field(default_factory=dict)
    """Offsets moved out by change_invisible whose lease of its own (id given) is gone:
    acked by its own handle, or moved on (the caller tells which)."""


def lease_prefix(topic: str, queue: int) -> str:
    return stream_id(topic, queue) + LEASE_MARK


def lease_stream(topic: str, queue: int, slot: LeaseSlot) -> str:
    start, single = slot
    return f"{lease_prefix(topic, queue)}{start:020d}{'m' if single else ''}"


class GroupStateStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    @property
    def table(self) -> str:
        return self._table

    # ------------------------------------------------------------------ summaries
    def load(self, group: str, topic: str, queues: Iterable[int]) -> dict[int, GroupQueueState]:
        """Consistent read of the summaries of ``queues`` (absent ones start fresh)."""
        wanted = list(queues)
        keys = [{"group_name": group, "stream": stream_id(topic, q)} for q in wanted]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return self.parse(group, topic, wanted, found[self._table])[0]

    def load_one(self, group: str, topic: str, queue: int) -> GroupQueueState:
        return self.load(group, topic, [queue])[queue]

    def to_read(self, group: str, topic: str, queues: list[int]) -> KeysToRead:
        """Keys of the summaries of ``queues`` and of the subscription, for a batched read."""
        keys = [{"group_name": group, "stream": stream_id(topic, q)} for q in queues]
        keys.append({"group_name": group, "stream": topic + SUBSCRIPTION_SUFFIX})
        return KeysToRead(self._table, keys)

    @staticmethod
    def parse(
        group: str, topic: str, queues: list[int], items: list[dict[str, Any]]
    ) -> tuple[dict[int, GroupQueueState], str | None]:
        """Summaries (absent ones start fresh) and the subscribed filter from read items."""
        states = {q: GroupQueueState(group, topic, q) for q in queues}
        subscription = None
        for values in items:
            if values["stream"] == topic + SUBSCRIPTION_SUFFIX:
                subscription = values["filter"]
            elif values.get("topic") == topic and values.get("queue") in states:
                states[values["queue"]] = _state(values)
        return states, subscription

    # ------------------------------------------------------------------ leases
    def load_leases(self, state: GroupQueueState) -> None:
        """Read every open lease of the state's queue (consistent); its bounds become exact
        on the next ``refresh``."""
        if state.complete:
            return
        state.leases = {
            lease.lease_id: lease
            for lease in self._query_leases(
                state.group,
                "#s BETWEEN :lo AND :hi",
                {":lo": lease_prefix(state.topic, state.queue), ":hi": _prefix_end(state)},
            )
        }
        state.complete = True

    def load_lease(self, state: GroupQueueState, lease_id: str) -> Lease | None:
        """Read the lease ``lease_id`` names into ``state``; None if that lease is over."""
        slot = lease_slot(lease_id)
        if slot is None:
            return None
        item = self._client.get_item(
            TableName=self._table,
            Key=self._lease_key(state.group, state.topic, state.queue, slot),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        lease = _lease(from_item(item))
        state.leases.setdefault(lease.lease_id, lease)
        return lease if lease.lease_id == lease_id else None

    def leases_covering_each(
        self, group: str, topic: str, queue: int, offsets: list[int]
    ) -> dict[int, list[Lease]]:
        """For each of ``offsets``, the open leases whose range holds it: the one it was
        leased under, and the lease of its own if change_invisible moved it. Two queries
        whatever their number: backwards from the lowest offset to the range lease at or
        below it, then forwards up to the highest."""
        lo, hi = min(offsets), max(offsets)
        near: dict[LeaseSlot, Lease] = {}
        for lease in self._query_leases(
            group,
            "#s BETWEEN :lo AND :hi",
            {":lo": lease_prefix(topic, queue), ":hi": lease_stream(topic, queue, (lo, True))},
            backwards=True,
        ):
            near[lease.slot] = lease
            if not lease.slot[1]:
                break  # range leases do not overlap: the first one at or below decides
        if hi > lo:
            for lease in self._query_leases(
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
        starts = [start for start, _ in ranges]
        found: dict[int, list[Lease]] = {}
        for offset in offsets:
            covering = [singles[offset]] if offset in singles else []
            below = bisect.bisect_right(starts, offset) - 1
            if below >= 0 and ranges[below][1].start <= offset < ranges[below][1].end:
                covering.append(ranges[below][1])
            found[offset] = covering
        return found

    def ack(
        self,
        group: str,
        topic: str,
        queue: int,
        lease_id: str,
        offsets: list[int],
        *,
        before_add: Callable[[], None] | None = None,
    ) -> LeaseAck | None:
        """Add ``offsets`` to the lease's settled set; None if ``lease_id`` is not its id.

        An ack of every offset delivered under the lease is one conditional delete; any
        other runs ``before_add`` first, then one conditional ``ADD``, which returns the
        lease: offsets a move forwarded (``gone``) were not acked. An offset moved out by
        change_invisible is settled by deleting its lease of its own, conditional on that
        lease still being the one made from this delivery. A lease left with nothing
        unsettled is deleted, conditional on the version the ``ADD`` returned.
        """
        slot = lease_slot(lease_id)
        if slot is None:
            return None
        key = self._lease_key(group, topic, queue, slot)
        if offsets and delivered_count(lease_id) == len(set(offsets)):
            settled = self._settle_whole(key, lease_id)
            if settled is not None:
                return LeaseAck() if settled else None
        if before_add is not None:
            before_add()
        try:
            item = self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="ADD acked :acked, v :one",
                ConditionExpression="lease_id = :id",
                ExpressionAttributeValues=to_item(
                    {":acked": set(offsets), ":one": 1, ":id": lease_id}
                ),
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        lease = _lease(from_item(item))
        outcome = LeaseAck(stale=set(lease.gone & set(offsets)))
        singles = {
            offset: single_lease_id(lease_id, offset)
            for offset in sorted(lease.moved & set(offsets))
        }
        requests = [
            _delete_request(
                self._table,
                self._lease_key(group, topic, queue, (offset, True)),
                "lease_id = :id",
                {":id": single},
            )
            for offset, single in singles.items()
        ]
        if not lease.unsettled():
            requests.append(_delete_request(self._table, key, lease_unchanged, _as_read(lease)))
            if lease.gone:  # a nack's handle acked later still finds its message moved on
                requests.append(self._mark_request(group, topic, queue, lease))
        failed = self._delete_each(requests)
        for position, (offset, single) in enumerate(singles.items()):
            if position not in failed:
                continue
            if failed[position]:
                outcome.stale.add(offset)  # its lease of its own has another id: redelivered
            else:
                outcome.vanished[offset] = single
        return outcome

    def _delete_each(self, requests: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Run the conditional deletes (and puts) ``requests``; position → the item as found (empty
        if absent) of those whose condition failed. One transaction (a single delete on its
        own); a cancelled one says which conditions failed, and the rest go again in one
        more: calls per ack, not per delete."""
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
        kind, body = next(iter(request.items()))
        call = self._client.delete_item if kind == "Delete" else self._client.put_item
        try:
            call(**body, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return {position: from_item(exc.response.get("Item") or {})}
        return {}

    def _settle_whole(self, key: dict[str, Any], lease_id: str) -> bool | None:
        """Delete the lease: one small conditional delete instead of an ``ADD`` of every
        offset and then a delete. False if the lease no longer has this id (as a failed
        ``ADD`` would say); None if it has but a message was moved out of it
        (change_invisible) or on (a nack): take the ``ADD`` path.

        The caller acks as many distinct offsets of the lease as were delivered under its
        id (signed handles: each one such an offset), so none is left unsettled, provided
        the lease still has that id and nothing was moved out of it or on.
        """
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=key,
                ConditionExpression=(
                    "lease_id = :id AND attribute_not_exists(moved) AND attribute_not_exists(gone)"
                ),
                ExpressionAttributeValues=to_item({":id": lease_id}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            current = from_item(exc.response.get("Item") or {})
            return None if current.get("lease_id") == lease_id else False
        return True

    # ------------------------------------------------------------------ moves
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
            requests.append(self._mark_request(state.group, state.topic, state.queue, after))
        return requests

    def settle_request(self, state: GroupQueueState, before: Lease, after: Lease) -> dict[str, Any]:
        """The lease's own item of :meth:`settle_requests`: a put of ``after``, or a delete
        if it has nothing unsettled, conditional on the lease as read."""
        condition = {
            "ConditionExpression": lease_unchanged,
            "ExpressionAttributeValues": to_item(_as_read(before)),
        }
        if after.unsettled():
            item = to_item(_lease_values(state, after))
            return {"Put": {"TableName": self._table, "Item": item, **condition}}
        key = self._lease_key(state.group, state.topic, state.queue, before.slot)
        return {"Delete": {"TableName": self._table, "Key": key, **condition}}

    def _mark_request(self, group: str, topic: str, queue: int, lease: Lease) -> dict[str, Any]:
        """A transaction item storing the moved mark of ``lease`` (deleted with its
        ``gone`` offsets)."""
        mark = {
            **self._mark_key(group, topic, queue, lease.lease_id),
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
            kind, body = next(iter(requests[0].items()))
            call = self._client.delete_item if kind == "Delete" else self._client.put_item
            call(**body)
        except ClientError as exc:
            if error_code(exc) in (
                "ConditionalCheckFailedException",
                "TransactionCanceledException",
            ):
                return False
            raise
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
        keys = [{"group_name": group, "stream": _mark_stream(topic, queue, x)} for x in lease_ids]
        return KeysToRead(self._table, keys, consistent=True)

    def parse_marks(
        self, topic: str, queue: int, lease_ids: Iterable[str], found: dict[str, list[Any]]
    ) -> dict[str, frozenset[int]]:
        """:meth:`moved_marks` from a batched read's items (table → items)."""
        by_stream = {_mark_stream(topic, queue, x): x for x in lease_ids}
        return {
            by_stream[item["stream"]]: frozenset(int(o) for o in item.get("gone", ()))
            for item in found.get(self._table, ())
            if item.get("stream") in by_stream
        }

    # ------------------------------------------------------------------ writing
    def save(self, state: GroupQueueState, extra_items: list[dict[str, Any]] | None = None) -> bool:
        """Write the summary and the leases ``state`` touched if nobody changed them since
        they were read; False if somebody did. ``extra_items`` (full transaction items,
        any table) commit in the same transaction.

        Leases that were settled when read are deleted on their own (settled stays
        settled); everything else is one transaction (one conditional put without leases).
        """
        current = {lease.slot: lease for lease in state.leases.values()}
        writes: list[dict[str, Any]] = []
        cleanup: list[tuple[dict[str, Any], Lease]] = []
        for slot, before in state.touched.items():
            after = current.get(slot)
            key = self._lease_key(state.group, state.topic, state.queue, slot)
            if after is None and before is not None and not before.unsettled():
                cleanup.append((key, before))
            elif after is None and before is not None:
                writes.append({"Delete": {"Key": key, **_lease_condition(before)}})
            elif after is not None:
                item = _lease_values(state, replace_version(after, before))
                writes.append({"Put": {"Item": to_item(item), **_lease_condition(before)}})
        summary = {
            "Item": to_item(_values(state, version=state.version + 1)),
            **_summary_condition(state),
        }
        try:
            if writes or extra_items:
                items = [{"Put": summary}, *writes]
                self._client.transact_write_items(
                    TransactItems=[
                        *(
                            {
                                kind: {"TableName": self._table, **body}
                                for kind, body in item.items()
                            }
                            for item in items
                        ),
                        *(extra_items or []),
                    ],
                    ClientRequestToken=uuid.uuid4().hex,
                )
            else:
                self._client.put_item(TableName=self._table, **summary)
        except ClientError as exc:
            if error_code(exc) in (
                "ConditionalCheckFailedException",
                "TransactionCanceledException",
            ):
                self._delete_settled(cleanup)
                return False
            raise
        except StorageContended:  # a concurrent write held an item: re-read and retry
            self._delete_settled(cleanup)
            return False
        self._delete_settled(cleanup)
        state.version += 1
        state.leases = {
            lease_id: (
                replace_version(lease, state.touched[lease.slot])
                if lease.slot in state.touched
                else lease
            )
            for lease_id, lease in state.leases.items()
        }
        state.touched.clear()
        state.stored = state.summary()
        state.stored_lock = (state.lock_owner, state.lock_expiry)
        return True

    # ------------------------------------------------------------------ subscriptions
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

    # ------------------------------------------------------------------ whole groups
    def list_group(self, group: str) -> tuple[list[GroupQueueState], dict[str, str]]:
        """Every state of the group with all its leases, and its subscriptions."""
        states: dict[str, GroupQueueState] = {}
        leases: list[tuple[str, Lease]] = []
        subscriptions: dict[str, str] = {}
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="group_name = :g",
            ExpressionAttributeValues=to_item({":g": group}),
            ConsistentRead=True,
        ):
            for values in map(from_item, page["Items"]):
                stream = values["stream"]
                if stream.startswith("#"):  # group settings, dead-letter marks (retries)
                    continue
                if stream.startswith(NOT_A_STREAM):
                    continue  # the group's consumer registry (storage/consumer_registry.py)
                if stream.endswith(SUBSCRIPTION_SUFFIX):
                    subscriptions[values["topic"]] = values["filter"]
                elif LEASE_MARK in stream:
                    leases.append((stream.split(LEASE_MARK)[0], _lease(values)))
                else:
                    states[stream] = _state(values)
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

    # ------------------------------------------------------------------ helpers
    def _mark_key(self, group: str, topic: str, queue: int, lease_id: str) -> dict[str, Any]:
        return {"group_name": group, "stream": _mark_stream(topic, queue, lease_id)}

    def _lease_key(self, group: str, topic: str, queue: int, slot: LeaseSlot) -> dict[str, Any]:
        return to_item({"group_name": group, "stream": lease_stream(topic, queue, slot)})

    def _query_leases(
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
            yield from (_lease(from_item(item)) for item in page["Items"])

    def _delete_settled(self, leases: list[tuple[dict[str, Any], Lease]]) -> None:
        """Remove leases read settled, each only if still as read (id and version); a
        failure only leaves them for the next lease read to remove (the save stands)."""
        try:
            for key, lease in leases:
                self._delete_if(key, lease_unchanged, _as_read(lease))
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


def _mark_stream(topic: str, queue: int, lease_id: str) -> str:
    return f"{MOVED_MARK}{stream_id(topic, queue)}.{lease_id}"


def _delete_request(
    table: str, key: dict[str, Any], condition: str, values: dict[str, Any]
) -> dict[str, Any]:
    return {
        "Delete": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
        }
    }


def replace_version(lease: Lease, before: Lease | None) -> Lease:
    """``lease`` as it is stored once written over ``before`` (None: a new item)."""
    return replace(lease, version=(before.version if before else 0) + 1)


def _prefix_end(state: GroupQueueState) -> str:
    return lease_prefix(state.topic, state.queue) + "~"


def _summary_condition(state: GroupQueueState) -> dict[str, Any]:
    if state.version == 0:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": unchanged_since_read,
        "ExpressionAttributeValues": to_item({":version": state.version}),
    }


def _lease_condition(before: Lease | None) -> dict[str, Any]:
    if before is None:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": lease_unchanged,
        "ExpressionAttributeValues": to_item(_as_read(before)),
    }


def _as_read(lease: Lease) -> dict[str, Any]:
    """Values of ``lease_unchanged`` for ``lease`` as read."""
    return {":id": lease.lease_id, ":v": lease.version}


def _values(state: GroupQueueState, *, version: int) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": stream_id(state.topic, state.queue),
        "topic": state.topic,
        "queue": state.queue,
        "committed": state.committed,
        "cursor": state.cursor,
        "cursor_base": state.cursor_base,
        "earliest_deadline": state.earliest_deadline,
        "open_leases": state.open_leases,
        "version": version,
        "lock_owner": state.lock_owner,  # orderly consumption (FIFO topics)
        "lock_expiry": state.lock_expiry or None,
    }


def _state(v: dict[str, Any]) -> GroupQueueState:
    state = GroupQueueState(
        group=v["group_name"],
        topic=v["topic"],
        queue=v["queue"],
        committed=v["committed"],
        cursor=v["cursor"],
        cursor_base=v["cursor_base"],
        earliest_deadline=v.get("earliest_deadline"),
        open_leases=v.get("open_leases", 0),
        version=v["version"],
        lock_owner=v.get("lock_owner"),
        lock_expiry=v.get("lock_expiry", 0),
    )
    state.stored = state.summary()
    state.stored_lock = (state.lock_owner, state.lock_expiry)
    return state


def _lease_values(state: GroupQueueState, lease: Lease) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": lease_stream(state.topic, state.queue, lease.slot),
        "lease_id": lease.lease_id,
        "start": lease.start,
        "end": lease.end,
        "deadline": lease.deadline,
        "attempt": lease.attempt,
        "v": lease.version,
        "acked": set(lease.acked) or None,
        "moved": set(lease.moved) or None,
        "gone": set(lease.gone) or None,
    }


def _lease(v: dict[str, Any]) -> Lease:
    return Lease(
        v["lease_id"],
        v["start"],
        v["end"],
        v["deadline"],
        v["attempt"],
        frozenset(v.get("moved", ())),
        frozenset(v.get("acked", ())),
        frozenset(v.get("gone", ())),
        v.get("v", 0),
    )
