"""The retry service: one object wiring lease expiry, the retry topic, nacks and the
group's retry settings; a receive uses its ``expiry`` and ``retry_topic``."""

from __future__ import annotations

from collections.abc import Callable

from ...rules.receipts import ReceiptSigner
from ...storage.group_configs import GroupConfigStore
from ...storage.group_views import GroupViewReader
from ...storage.groups import GroupStateStore
from ...storage.log_index import LogIndex
from ...storage.move_records import MoveRecords
from ..batch_reader import BatchReader
from ..moves import MoveAppender
from ..offset_lookup import OffsetLookup
from ..receipt_handles import ReceiptHandles
from ..topic_catalog import TopicCatalog
from ..trace import traced_settles
from .handoff import Handoff
from .lease_expiry import LeaseExpiry
from .nack import Nacks
from .retry_topic import RetryTopic
from .settings import RetrySettings


class RetryService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        moves: MoveAppender,
        index: LogIndex,
        reader: BatchReader,
        states: GroupStateStore,
        views: GroupViewReader,
        configs: GroupConfigStore,
        records: MoveRecords,
        signer: Callable[[], ReceiptSigner],
        clock: Callable[[], int],
    ) -> None:
        lookup = OffsetLookup(index, reader)
        self.settings = RetrySettings(configs)
        self.retry_topic = RetryTopic(
            topics=topics, moves=moves, index=index, views=views, settings=self.settings,
            clock=clock,
        )  # fmt: skip
        self.expiry = LeaseExpiry(
            retry_topic=self.retry_topic,
            settings=self.settings,
            index=index,
            reader=reader,
            lookup=lookup,
            states=states,
            records=records,
            clock=clock,
        )
        self.handoff = Handoff(
            retry_topic=self.retry_topic,
            moves=moves,
            lookup=lookup,
            states=states,
            handles=ReceiptHandles(signer),
            clock=clock,
        )
        nacks = Nacks(
            retry_topic=self.retry_topic,
            settings=self.settings,
            lookup=lookup,
            states=states,
            handles=ReceiptHandles(signer),
            clock=clock,
        )
        # the operations, as their modules define them
        self.nack = traced_settles("nacked", nacks.nack, topics, lambda h: signer().decode(h))
        self.max_delivery_attempts = self.settings.max_delivery_attempts
        self.set_max_delivery_attempts = self.settings.set_max_delivery_attempts
        self.dead_letter_destination = self.settings.dead_letter_destination
        self.set_dead_letter_destination = self.settings.set_dead_letter_destination
        self.redelivery = self.settings.redelivery
        self.set_redelivery = self.settings.set_redelivery
