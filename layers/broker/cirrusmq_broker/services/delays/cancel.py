"""Cancelling a delayed message before it is due, by message id.

The send receipt gives the message's due time; the delay items of that due second are a
single-partition query, so the produce path writes nothing per message for this. A cancel
marks the id on its delay item (the move skips it) and leaves a cancel record, so that a
repeated cancel answers the same after the item moved.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import AlreadyDelivered, InvalidRequest, ScheduledMessageNotFound
from ...storage.batch_objects import BatchObjectGone
from ...storage.delays.items import CANCEL_RECORD_DAYS, DelayItemStore
from ...storage.delays.objects import DelayObjectStore
from ...validation import MAX_TIMESTAMP_MS, check_message_id
from ..topic_catalog import TopicCatalog


class DelayCancel:
    """Takes a delayed message back before its release (the API's cancel route)."""

    def __init__(
        self,
        *,
        topics: TopicCatalog,
        items: DelayItemStore,
        objects: DelayObjectStore,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._items = items
        self._objects = objects
        self._clock = clock

    def cancel(self, topic_name: str, message_id: str, delivery_timestamp: int) -> int:
        """Cancel the delayed message; returns its due time. Idempotent.

        Raises AlreadyDelivered when it was due and moved into the topic, and
        ScheduledMessageNotFound when no such message is scheduled at that time.
        """
        topic = self._topics.active(topic_name)
        check_message_id(message_id)
        if not 0 <= delivery_timestamp <= MAX_TIMESTAMP_MS:
            raise InvalidRequest("delivery_timestamp must be ms since the epoch")
        from ...codec import decode_batch

        for entry in self._items.in_second(delivery_timestamp):
            if entry.topic != topic.name:
                continue
            if message_id in entry.cancelled:
                return entry.due_ms
            try:
                data = self._objects.get(entry.object_key)
            except BatchObjectGone:
                continue
            rows = decode_batch(data, topic=topic.name, queue=entry.queue, base_offset=0)
            ids = {m.message_id for m in rows[entry.first_row : entry.first_row + entry.count]}
            if message_id not in ids:
                continue
            expires = entry.due_ms // 1000 + CANCEL_RECORD_DAYS * 86400
            if self._items.cancel(entry, message_id, record_expires_at=expires):
                return entry.due_ms
            break  # moved meanwhile
        if self._items.was_cancelled(topic.name, message_id):
            return delivery_timestamp
        if delivery_timestamp <= self._clock():
            raise AlreadyDelivered(
                f"message {message_id!r} was due at {delivery_timestamp} and is delivered "
                "(or was never scheduled then)"
            )
        raise ScheduledMessageNotFound(
            f"no message {message_id!r} is scheduled in topic {topic.name!r} "
            f"at {delivery_timestamp}"
        )
