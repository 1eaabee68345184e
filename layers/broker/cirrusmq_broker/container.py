"""Builds the broker's services from settings, once per process (Lambda container)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .clock import now_ms
from .rules.receipts import ReceiptSigner
from .services.access_keys import AccessKeysService
from .services.admin import AdminService
from .services.auth import Authenticator
from .services.batch_reader import BatchReader
from .services.batch_writer import BatchWriter
from .services.dead_letters import DeadLetterService
from .services.delayed_produce import TimerWriter
from .services.delivery import ConsumeService
from .services.janitor import JanitorService
from .services.log_reader import LogReader
from .services.membership import MembershipService
from .services.message_lookup import MessageLookup
from .services.moves import MoveAppender
from .services.offset_reset import OffsetResetService
from .services.produce import ProduceService
from .services.retries import RetryService
from .services.scheduled_cancel import ScheduledCancel
from .services.scheduler import DelayScheduler
from .services.scheduler_wake import SchedulerWake
from .services.topic_catalog import TopicCatalog
from .settings import Settings
from .storage.access_keys import AccessKeyStore, SecretCipher
from .storage.appends import BatchAppender
from .storage.batch_objects import BatchObjectStore
from .storage.clients import aws_client
from .storage.consumer_registry import ConsumerRegistry
from .storage.group_configs import GroupConfigStore
from .storage.group_offsets import GroupOffsetWriter
from .storage.group_views import GroupViewReader
from .storage.groups import GroupStateStore
from .storage.janitor_checkpoints import SweepCheckpoints
from .storage.log_index import LogIndex
from .storage.move_records import MoveRecords
from .storage.nonces import NonceStore
from .storage.producers import ProducerRecords
from .storage.queue_heads import QueueHeads
from .storage.redrive_claims import RedriveClaimStore
from .storage.scheduler_invoke import FunctionStarter
from .storage.timer_objects import TimerObjectStore
from .storage.timers import TimerStore
from .storage.topics import TopicStore

if TYPE_CHECKING:
    from .services.transactions import TransactionService


@dataclass(frozen=True)
class Broker:
    """The services one process serves; their stores are built lazily on first use."""

    settings: Settings
    clock: Callable[[], int] = now_ms
    """Milliseconds since the epoch; tests pass a fake one."""

    @functools.cached_property
    def _dynamodb(self):  # noqa: ANN202
        return aws_client("dynamodb", self.settings)

    @functools.cached_property
    def topic_store(self) -> TopicStore:
        return TopicStore(self._dynamodb, self.settings.topics_table)

    @functools.cached_property
    def catalog(self) -> TopicCatalog:
        return TopicCatalog(self.topic_store)

    @functools.cached_property
    def index(self) -> LogIndex:
        return LogIndex(self._dynamodb, self.settings.log_index_table)

    @functools.cached_property
    def objects(self) -> BatchObjectStore:
        return BatchObjectStore(aws_client("s3", self.settings), self.settings.bucket)

    @functools.cached_property
    def states(self) -> GroupStateStore:
        return GroupStateStore(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def heads(self) -> QueueHeads:
        return QueueHeads(self._dynamodb, self.settings.queue_heads_table)

    @functools.cached_property
    def reader(self) -> BatchReader:
        return BatchReader(self.objects)

    def _new_writer(self) -> BatchWriter:
        """The one append path, with its own cache of queue heads (one per service)."""
        return BatchWriter(
            self.objects, BatchAppender(self._dynamodb, self.index, self.heads, self.producers)
        )

    @functools.cached_property
    def producers(self) -> ProducerRecords:
        return ProducerRecords(self._dynamodb, self.settings.producers_table)

    @functools.cached_property
    def admin(self) -> AdminService:
        return AdminService(
            store=self.topic_store,
            catalog=self.catalog,
            index=self.index,
            heads=self.heads,
            clock=self.clock,
        )

    @functools.cached_property
    def produce(self) -> ProduceService:
        return ProduceService(
            topics=self.catalog,
            objects=self.objects,
            writer=self._new_writer(),
            index=self.index,
            producers=self.producers,
            clock=self.clock,
            timer_writer=self.timer_writer,
            wake=self.scheduler_wake,
        )

    # ---------------------------------------------------------------- delays (issue 9)
    @functools.cached_property
    def timers(self) -> TimerStore:
        return TimerStore(self._dynamodb, self.settings.timers_table)

    @functools.cached_property
    def timer_objects(self) -> TimerObjectStore:
        return TimerObjectStore(aws_client("s3", self.settings), self.settings.bucket)

    @functools.cached_property
    def timer_writer(self) -> TimerWriter | None:
        if not self.settings.timers_table:
            return None
        return TimerWriter(objects=self.timer_objects, timers=self.timers)

    @functools.cached_property
    def scheduler(self) -> DelayScheduler:
        return DelayScheduler(
            timers=self.timers,
            timer_objects=self.timer_objects,
            topics=self.catalog,
            writer=self._new_writer(),
            clock=self.clock,
        )

    @functools.cached_property
    def scheduler_wake(self) -> SchedulerWake | None:
        """Starts a scheduler run for a message due before the next scheduled one."""
        name = self.settings.scheduler_function
        if not name or not self.settings.timers_table:
            return None
        client = functools.partial(aws_client, "lambda", self.settings, quick=True)
        return SchedulerWake(FunctionStarter(client, name), self.clock)

    @functools.cached_property
    def scheduled_cancel(self) -> ScheduledCancel:
        return ScheduledCancel(
            topics=self.catalog,
            timers=self.timers,
            timer_objects=self.timer_objects,
            clock=self.clock,
        )

    # ---------------------------------------------------------------- end delays

    @functools.cached_property
    def consume(self) -> ConsumeService:
        return ConsumeService(
            topics=self.catalog,
            index=self.index,
            heads=self.heads,
            reader=self.reader,
            states=self.states,
            views=GroupViewReader(self._dynamodb, self.heads, self.states, self.registry),
            signer=ReceiptSigner(self.settings.receipt_secret),
            clock=self.clock,
            retries=self.retries,
        )

    # ---------------------------------------------------------------- retries (issue 9)
    @functools.cached_property
    def group_configs(self) -> GroupConfigStore:
        return GroupConfigStore(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def moves(self) -> MoveAppender:
        return MoveAppender(
            store=self.topic_store,
            writer=self._new_writer(),
            producers=self.producers,
            clock=self.clock,
        )

    @functools.cached_property
    def retries(self) -> RetryService:
        return RetryService(
            topics=self.catalog,
            moves=self.moves,
            index=self.index,
            reader=self.reader,
            states=self.states,
            views=GroupViewReader(self._dynamodb, self.heads, self.states),
            configs=self.group_configs,
            records=MoveRecords(self._dynamodb, self.settings.producers_table),
            signer=lambda: ReceiptSigner(self.settings.receipt_secret),
            clock=self.clock,
        )

    @functools.cached_property
    def dead_letters(self) -> DeadLetterService:
        return DeadLetterService(
            topics=self.catalog,
            moves=self.moves,
            index=self.index,
            heads=self.heads,
            reader=self.reader,
            configs=self.group_configs,
            clock=self.clock,
            claims=RedriveClaimStore(self._dynamodb, self.settings.producers_table),
        )

    # ---------------------------------------------------------------- end of retries
    # --- consumer registration, heartbeats, orderly locks (issue 11)
    @functools.cached_property
    def registry(self) -> ConsumerRegistry:
        return ConsumerRegistry(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def membership(self) -> MembershipService:
        return MembershipService(topics=self.catalog, registry=self.registry, clock=self.clock)

    # --- end consumer registration

    @functools.cached_property
    def lookup(self) -> MessageLookup:
        return MessageLookup(
            topics=self.catalog, index=self.index, reader=self.reader, producers=self.producers
        )

    @functools.cached_property
    def _cipher(self) -> SecretCipher:
        return SecretCipher(aws_client("kms", self.settings), self.settings.secrets_key_id)

    @functools.cached_property
    def _access_keys(self) -> AccessKeyStore:
        return AccessKeyStore(self._dynamodb, self.settings.access_keys_table)

    @functools.cached_property
    def auth(self) -> Authenticator:
        return Authenticator(
            keys=self._access_keys,
            cipher=self._cipher,
            nonces=NonceStore(self._dynamodb, self.settings.nonces_table),
            clock=self.clock,
        )

    @functools.cached_property
    def access_keys(self) -> AccessKeysService:
        return AccessKeysService(
            store=self._access_keys,
            cipher=self._cipher,
            clock=self.clock,
            on_change=self.auth.forget,
        )

    @functools.cached_property
    def janitor(self) -> JanitorService:
        return JanitorService(
            topics=self.topic_store,
            index=self.index,
            heads=self.heads,
            objects=self.objects,
            states=self.states,
            checkpoints=SweepCheckpoints(self._dynamodb, self.settings.queue_heads_table),
            orphan_grace_seconds=self.settings.orphan_grace_seconds,
            clock=self.clock,
        )

    # ------------------------------------------------------------ reads by offset, offset reset
    @functools.cached_property
    def log_reader(self) -> LogReader:
        return LogReader(
            topics=self.catalog,
            index=self.index,
            heads=self.heads,
            reader=self.reader,
            clock=self.clock,
        )

    @functools.cached_property
    def offset_reset(self) -> OffsetResetService:
        return OffsetResetService(
            topics=self.catalog,
            index=self.index,
            heads=self.heads,
            states=self.states,
            writer=GroupOffsetWriter(self._dynamodb, self.settings.groups_table),
            log_reader=self.log_reader,
            clock=self.clock,
        )

    # ------------------------------------------------------ transactions (issue 10)
    @functools.cached_property
    def transactions(self) -> TransactionService:
        from .services.transactions import TransactionService
        from .storage.half_objects import HalfObjectStore
        from .storage.transactions import TransactionStore

        halves = HalfObjectStore(aws_client("s3", self.settings), self.settings.bucket)
        appender = BatchAppender(self._dynamodb, self.index, self.heads, self.producers)
        return TransactionService(
            store=TransactionStore(self._dynamodb, self.settings.transactions_table),
            halves=halves,
            topics=self.catalog,
            writer=BatchWriter(halves.batch_objects, appender),
            clock=self.clock,
            records=self.producers,
        )

    # ----------------------------------------------- end of transactions (issue 10)


@functools.lru_cache(maxsize=8)
def broker_for(settings: Settings) -> Broker:
    """The process-wide broker for these settings."""
    return Broker(settings)


def current_broker() -> Broker:
    """The broker configured by this process's environment."""
    return broker_for(Settings.from_env())
