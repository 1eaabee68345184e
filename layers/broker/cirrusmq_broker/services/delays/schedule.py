"""Scheduling a send's delayed messages: due times, the delay object and its items.

A send's delayed messages are written once, as ONE delay object under ``timers/`` (rows
sorted by target queue and due second), with one delay item per (queue, due second). The
items are put in the send's own append transaction (with its idempotency record), so a
retried stamped send stores nothing twice. The release (:mod:`.release`) moves them into
their topics when due; :mod:`.cancel` takes one back before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ulid import ULID

from ...errors import TooManyDueTimes
from ...model import MessageInput, NewMessage, ProducerStamp, SendReceipt, SystemFields, Topic
from ...rules.delays import MAX_DELAY_ITEMS_PER_SEND, delay_groups, due_time
from ...storage.delays.items import DelayItem, DelayItemStore
from ...storage.delays.objects import DelayObjectStore, delay_object_key, delay_tier_days


def due_times(topic: Topic, inputs: Sequence[MessageInput], now: int) -> list[int | None]:
    """Each message's due time (None: delivered at once); raises on a bad delay."""
    return [
        due_time(
            delay_level=raw.delay_level,
            delivery_timestamp=raw.delivery_timestamp,
            now=now,
            message_type=topic.message_type,
            what=f"message {position}",
        )
        for position, raw in enumerate(inputs)
    ]


def delayed_receipt(message: NewMessage, queue: int, due: int) -> SendReceipt:
    """The receipt of a delayed message: its queue and due time (its offset comes later)."""
    return SendReceipt(message.message_id, queue, None, due)


class DelayWriter:
    """Writes a send's delay object and builds the puts of its delay items."""

    def __init__(self, *, objects: DelayObjectStore, items: DelayItemStore) -> None:
        self._objects = objects
        self._items = items

    @property
    def items(self) -> DelayItemStore:
        """The delay items' table (it also holds the release's run lease)."""
        return self._items

    def write(
        self,
        topic: Topic,
        delayed: dict[int, list[tuple[NewMessage, int]]],
        now: int,
        stamp: ProducerStamp | None,
        digest: str,
    ) -> tuple[str, list[dict]]:
        """Write the delay object; return its key and the delay item puts.

        The object's name is new for every attempt (a retry may compute other due times
        for relative delays, and deletes its own object when the first attempt was
        recorded: see ``discard``).
        """
        from ...codec import encode_batch

        rows = sorted(
            ((queue, due, message) for queue, ms in delayed.items() for message, due in ms),
            key=lambda row: (row[0], row[1] // 1000),
        )
        groups = delay_groups([(queue, due) for queue, due, _ in rows])
        if len(groups) > MAX_DELAY_ITEMS_PER_SEND:
            raise TooManyDueTimes(
                f"a send's delayed messages fall in {len(groups)} (queue, due second) groups; "
                f"at most {MAX_DELAY_ITEMS_PER_SEND} per send: split the batch"
            )
        messages = [
            dataclasses.replace(m, system=SystemFields(delivery_timestamp=due))
            for _, due, m in rows
        ]
        # Unique per attempt (never shared with a retry that may discard its own).
        name = f"{stamp.producer_id}-{stamp.sequence}-{ULID()}" if stamp else str(ULID())
        key = delay_object_key(now, name)
        data = encode_batch(messages, stored_timestamp=now, stamp=stamp)
        tier = delay_tier_days(now, max(due for _, due, _ in rows), topic.retention_hours)
        self._objects.put(key, data, tier_days=tier)
        entries = [
            DelayItem(
                due_ms=g.due_ms,
                item_id=f"{name}#{i}",
                topic=topic.name,
                queue=g.queue,
                object_key=key,
                first_row=g.first_row,
                count=g.count,
                created_ms=now,
            )
            for i, g in enumerate(groups)
        ]
        if len(entries) > 1:  # the one due last deletes the object, after the others
            final = max(entries, key=lambda e: e.due_key)
            others = tuple(e.key for e in entries if e is not final)
            entries = [
                dataclasses.replace(e, siblings=others)
                if e is final
                else dataclasses.replace(e, last=False)
                for e in entries
            ]
        return key, [self._items.put_request(e) for e in entries]

    def discard(self, key: str) -> None:
        """Delete a delay object no delay item refers to (a refused or repeated send)."""
        self._objects.delete([key])
