"""The stored messages at given offsets of a queue, and which of the others are past
retention.

A leased offset whose message is not found is settled without a delivery only when it is
surely past retention: a consistent read of the index finds no batch holding it, or finds
one whose object is gone, AND it lies below the queue's retention edge (its lowest retained
offset, read consistently). Anything else not found (a batch a read missed, an object gone
behind a live index item) stays undecided: the lease keeps it, a later pass looks again.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

from ..model import StoredMessage
from ..storage.log_index import LogIndex
from .batch_reader import BatchReader

log = logging.getLogger(__name__)


@dataclass
class Found:
    """What a lookup found at the offsets asked for."""

    messages: dict[int, StoredMessage] = field(default_factory=dict)
    expired: list[int] = field(default_factory=list)
    """Past retention, confirmed by the retention edge: they settle with no delivery."""
    undecided: list[int] = field(default_factory=list)
    """Not found, yet not past retention: left as they are."""


class OffsetLookup:
    def __init__(self, index: LogIndex, reader: BatchReader) -> None:
        self._index = index
        self._reader = reader

    def messages_at(self, topic: str, queue: int, offsets: list[int], *, now_s: int) -> Found:
        """The messages at ``offsets``: one index page (about 100 batches) per round, the
        object of each batch holding one of them read once (cached); the retention edge is
        read only when something was not found."""
        found = Found()
        missing: list[int] = []
        pending = sorted(set(offsets))
        while pending:
            entries = self._index.covering(topic, queue, pending[0], pending[-1])
            for entry in entries:
                first = bisect.bisect_left(pending, entry.base_offset)
                if first == len(pending) or pending[first] >= entry.next_offset:
                    continue  # holds none of the offsets asked for: its object is not read
                batch = self._reader.messages(entry)
                for offset in pending:
                    if offset >= entry.next_offset:
                        break
                    if 0 <= offset - entry.base_offset < len(batch):
                        found.messages[offset] = batch[offset - entry.base_offset]
            horizon = entries[-1].next_offset - 1 if entries else pending[-1]
            missing += [o for o in pending if o not in found.messages and o <= horizon]
            pending = [o for o in pending if o > horizon]
        if missing:
            edge = self._index.first_offset(topic, queue, now_s=now_s, end=missing[-1] + 1)
            found.expired = [o for o in missing if o < edge]
            found.undecided = [o for o in missing if o >= edge]
        if found.undecided:
            log.error(
                "offsets %s of %s#%d not found although retained; left for a later pass",
                found.undecided[:10],
                topic,
                queue,
            )
        return found
