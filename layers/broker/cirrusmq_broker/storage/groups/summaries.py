"""A queue's summary item: reading it (with the subscription, in one batched call), and
saving a state: the summary and the leases it touched, in one transaction conditional on
the versions as read (optimistic concurrency)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from ...errors import StorageContended
from ...rules.filters import Subscription
from ...rules.group_state import GroupQueueState, Lease
from ..dynamo import KeysToRead, batch_get, lost_race, to_item
from .codec import lease_condition, lease_values, replace_version, state_of, summary_update
from .keys import item_key, subscription_stream, summary_stream
from .leases import LeaseItems
from .subscriptions import subscription_of


class Summaries:
    def __init__(
        self, client: Any, table: str, leases: LeaseItems, *, leases_on_summary: bool = False
    ) -> None:
        self._client = client
        self._table = table
        self._leases = leases
        self._leases_on_summary = leases_on_summary

    def load(self, group: str, topic: str, queues: Iterable[int]) -> dict[int, GroupQueueState]:
        """Consistent read of the summaries of ``queues`` (absent ones start fresh)."""
        wanted = list(queues)
        keys = [item_key(group, summary_stream(topic, q)) for q in wanted]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        return self.parse(group, topic, wanted, found[self._table])[0]

    def to_read(
        self, group: str, topic: str, queues: list[int], *, subscription: bool = True
    ) -> KeysToRead:
        """Keys of the summaries of ``queues`` and (``subscription``) of the subscription,
        for a batched read."""
        keys = [item_key(group, summary_stream(topic, q)) for q in queues]
        if subscription:
            keys.append(item_key(group, subscription_stream(topic)))
        return KeysToRead(self._table, keys)

    def parse(
        self, group: str, topic: str, queues: list[int], items: list[dict[str, Any]]
    ) -> tuple[dict[int, GroupQueueState], Subscription | None]:
        """Summaries (absent ones start fresh) and the subscribed filter from read items."""
        states = {q: GroupQueueState(group, topic, q) for q in queues}
        subscription = None
        for values in items:
            if values["stream"] == subscription_stream(topic):
                subscription = subscription_of(values)
            elif values.get("topic") == topic and values.get("queue") in states:
                states[values["queue"]] = state_of(values)
        for state in states.values():
            state.leases_on_summary = self._leases_on_summary
        return states, subscription

    def save(self, state: GroupQueueState, extra_items: list[dict[str, Any]] | None = None) -> bool:
        """Write the summary and the leases ``state`` touched if nobody changed them since
        they were read; False if somebody did. ``extra_items`` (full transaction items,
        any table) commit in the same transaction.

        Leases that were settled when read are deleted on their own (settled stays
        settled); everything else is one transaction (one conditional update of the summary
        without leases). The lease stored on the summary (``inline``) is written with it.
        """
        current = {lease.slot: lease for lease in state.leases.values()}
        writes: list[dict[str, Any]] = []
        cleanup: list[tuple[dict[str, Any], Lease]] = []
        for slot, before in state.touched.items():
            after = current.get(slot)
            either = after if after is not None else before
            if either is not None and either.inline:
                continue  # stored on the summary: written with it
            if before is not None and before.inline:  # it moves to an item of its own
                before = None
            key = self._leases.key(state.group, state.topic, state.queue, slot)
            if after is None and before is not None and not before.unsettled():
                cleanup.append((key, before))
            elif after is None and before is not None:
                writes.append({"Delete": {"Key": key, **lease_condition(before)}})
            elif after is not None:
                item = lease_values(state, replace_version(after, before))
                writes.append({"Put": {"Item": to_item(item), **lease_condition(before)}})
        inline = state.inline_lease()
        if inline is not None and inline.slot in state.touched:
            inline = replace_version(inline, state.touched[inline.slot])
        summary = summary_update(state, inline)
        try:
            if writes or extra_items:
                items = [{"Update": summary}, *writes]
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
                self._client.update_item(TableName=self._table, **summary)
        except ClientError as exc:
            if lost_race(exc):
                self._leases.delete_settled(cleanup)
                return False
            raise
        except StorageContended:  # a concurrent write held an item: re-read and retry
            self._leases.delete_settled(cleanup)
            return False
        self._leases.delete_settled(cleanup)
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
        state.stored_inline = inline
        state.stored = state.summary()
        state.stored_lock = (state.lock_owner, state.lock_expiry)
        return True
