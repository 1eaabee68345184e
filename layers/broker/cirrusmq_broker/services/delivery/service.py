"""The consume service: one object wiring receive (receive.py), ack (ack.py),
change_invisible (invisible.py) and the group's status (status.py), as the API and the
container use them."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...rules.receipts import ReceiptSigner
from ...storage.group_views import GroupViewReader
from ...storage.groups import GroupStateStore
from ...storage.log_index import LogIndex
from ...storage.queue_heads import QueueHeads
from ..batch_reader import BatchReader
from ..offset_lookup import OffsetLookup
from ..receipt_handles import ReceiptHandles
from ..retries import RetryService
from ..topic_catalog import TopicCatalog
from ..trace import traced_deliveries, traced_settles
from .ack import Acks
from .invisible import InvisibleTime
from .queue_plan import QueuePlanner
from .receive import Receiver
from .status import GroupStatus


class ConsumeService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        heads: QueueHeads,
        reader: BatchReader,
        states: GroupStateStore,
        views: GroupViewReader,
        signer: ReceiptSigner,
        clock: Callable[[], int],
        retries: RetryService,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        lookup = OffsetLookup(index, reader)
        handles = ReceiptHandles(lambda: signer)
        planner = QueuePlanner(
            index=index, reader=reader, lookup=lookup, states=states, clock=clock
        )
        receiver = Receiver(
            topics=topics,
            states=states,
            views=views,
            planner=planner,
            handles=handles,
            expiry=retries.expiry,
            retry_topic=retries.retry_topic,
            settings=retries.settings,
            clock=clock,
            sleep=sleep,
        )
        acks = Acks(
            states=states, handles=handles, expiry=retries.expiry, planner=planner, clock=clock
        )
        invisible = InvisibleTime(
            states=states,
            lookup=lookup,
            handles=handles,
            retry_topic=retries.retry_topic,
            settings=retries.settings,
            clock=clock,
            planner=planner,
        )
        status = GroupStatus(states=states, heads=heads, clock=clock)
        # the operations, as their modules define them
        self.receive = traced_deliveries(
            receiver.receive, topics, signer.decode, signer.mark_traced
        )
        self.subscribe = receiver.subscribe
        self.ack = traced_settles("acked", acks.ack, topics, signer.decode)
        self.check_ack = acks.check
        self.delivery_ended = planner.delivery_ended
        self.change_invisible = invisible.change_invisible
        self.describe_group = status.describe_group
