"""Builds the broker's services from settings, once per process (Lambda container).

Read it as the map of the broker: each section below is one concern, in the order a
message meets them: the stores every service shares, the one append path, topics,
producing, delayed messages, transactions, consuming, retries and dead letters, consumer
membership, reads by offset, access keys, housekeeping. Every store and service is built
lazily on first use, so a handler pays only for what it calls.
"""

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
from .services.delays import DelayCancel, DelayRelease, DelayWriter, ReleaseWake
from .services.delivery import ConsumeService
from .services.group_history import GroupHistoryService
from .services.group_metrics import GroupMetricsService
from .services.janitor import JanitorService
from .services.key_lookup import KeyLookup
from .services.log_reader import LogReader
from .services.membership import MembershipService
from .services.message_lookup import MessageLookup
from .services.move_tasks import MoveTaskService
from .services.moves import MoveAppender
from .services.notifications import ChannelService, Notifier, WaitLimits
from .services.offset_reset import OffsetResetService
from .services.produce import ProduceService
from .services.retries import RetryService
from .services.topic_catalog import TopicCatalog
from .services.trace import TraceReader, TraceRecorder
from .settings import Settings
from .storage.access_keys import AccessKeyStore, SecretCipher
from .storage.appends import BatchAppender
from .storage.batch_objects import BatchObjectStore, layout_named
from .storage.clients import aws_client
from .storage.connection_posts import ConnectionPoster, management_client
from .storage.connections import ConnectionStore
from .storage.consumer_registry import ConsumerRegistry
from .storage.delays.invoke import FunctionStarter
from .storage.delays.items import DelayItemStore
from .storage.delays.objects import DelayObjectStore
from .storage.group_catalog import GroupCatalog
from .storage.group_configs import GroupConfigStore
from .storage.group_offsets import GroupOffsetWriter
from .storage.group_views import GroupViewReader
from .storage.groups import GroupStateStore
from .storage.janitor_checkpoints import SweepCheckpoints
from .storage.log_index import LogIndex
from .storage.metric_series import MetricSeriesReader
from .storage.move_records import MoveRecords
from .storage.move_tasks import MoveTaskStore
from .storage.nonces import NonceStore
from .storage.producers import ProducerRecords
from .storage.queue_heads import QueueHeads
from .storage.redrive_claims import RedriveClaimStore
from .storage.sqs_queues import SqsQueueStore
from .storage.topics import TopicStore
from .storage.trace_objects import TraceObjectStore
from .telemetry import NAMESPACE, SERVICE

if TYPE_CHECKING:
    from .services.consume_produce import ConsumeProduceSteps
    from .services.large_bodies import LargeBodyService
    from .services.transactions import TransactionService


@dataclass(frozen=True)
class Broker:
    """The services one process serves; their stores are built lazily on first use."""

    settings: Settings
    clock: Callable[[], int] = now_ms
    """Milliseconds since the epoch; tests pass a fake one."""

    # ------------------------------------------------------------ shared stores
    @functools.cached_property
    def _dynamodb(self):  # noqa: ANN202
        return aws_client("dynamodb", self.settings)

    @functools.cached_property
    def _s3(self):  # noqa: ANN202
        return aws_client("s3", self.settings)

    @functools.cached_property
    def topic_store(self) -> TopicStore:
        return TopicStore(self._dynamodb, self.settings.topics_table)

    @functools.cached_property
    def catalog(self) -> TopicCatalog:
        """Active topics, cached briefly: what every service asks about a topic."""
        return TopicCatalog(self.topic_store)

    @functools.cached_property
    def index(self) -> LogIndex:
        return LogIndex(self._dynamodb, self.settings.log_index_table)

    @functools.cached_property
    def heads(self) -> QueueHeads:
        return QueueHeads(self._dynamodb, self.settings.queue_heads_table)

    @functools.cached_property
    def producers(self) -> ProducerRecords:
        """Idempotency records of stamped appends (sends, moves, releases, commits)."""
        return ProducerRecords(self._dynamodb, self.settings.producers_table)

    @functools.cached_property
    def objects(self) -> BatchObjectStore:
        """Topics' batch objects: the message bucket, or the directory bucket chosen."""
        bucket = self.settings.batch_bucket or self.settings.bucket
        return BatchObjectStore(self._s3, bucket, layout=layout_named(self.settings.batch_storage))

    @functools.cached_property
    def reader(self) -> BatchReader:
        return BatchReader(self.objects)

    @functools.cached_property
    def states(self) -> GroupStateStore:
        return GroupStateStore(
            self._dynamodb,
            self.settings.groups_table,
            leases_on_summary=self.settings.leases_on_summary,
        )

    # ------------------------------------------------------------ the one append path
    @functools.cached_property
    def appender(self) -> BatchAppender:
        """Appends batches to queue logs; its cache of queue tails is shared by every
        writer of this process (a recreated topic is forgotten once for all)."""
        return BatchAppender(
            self._dynamodb, self.index, self.heads, self.producers, clock=self.clock
        )

    @functools.cached_property
    def writer(self) -> BatchWriter:
        """Writes a batch object under ``topics/`` and appends it: sends, moves, releases."""
        return BatchWriter(self.objects, self.appender)

    # ------------------------------------------------------------ topics
    @functools.cached_property
    def admin(self) -> AdminService:
        return AdminService(
            store=self.topic_store,
            catalog=self.catalog,
            index=self.index,
            heads=self.heads,
            clock=self.clock,
        )

    # ------------------------------------------------------------ producing
    @functools.cached_property
    def produce(self) -> ProduceService:
        return ProduceService(
            topics=self.catalog,
            objects=self.objects,
            writer=self.writer,
            index=self.index,
            producers=self.producers,
            clock=self.clock,
            delay_writer=self.delay_writer,
            wake=self.release_wake,
        )

    @functools.cached_property
    def large_bodies(self) -> LargeBodyService:
        """Upload grants, pointer checks and download URLs of bodies above 4 MiB."""
        from .services.large_bodies import LargeBodyService
        from .storage.clients import presigning_client
        from .storage.large_bodies import LargeBodyStore

        return LargeBodyService(
            topics=self.catalog,
            store=LargeBodyStore(
                self._s3, self.settings.bucket, presigner=presigning_client(self.settings)
            ),
            clock=self.clock,
        )

    @functools.cached_property
    def lookup(self) -> MessageLookup:
        """A message by id or key."""
        return MessageLookup(
            topics=self.catalog, index=self.index, reader=self.reader, producers=self.producers
        )

    @functools.cached_property
    def key_lookup(self) -> KeyLookup:
        """A topic's messages by key, newest first, a page at a time."""
        return KeyLookup(
            topics=self.catalog, index=self.index, reader=self.reader, clock=self.clock
        )

    # ------------------------------------------------------------ message trace
    @functools.cached_property
    def trace(self) -> TraceRecorder:
        """Opens a request's trace scope (``with broker.trace.request():``) and writes
        its events of traced topics as one object at its end (services/trace.py)."""
        return TraceRecorder(TraceObjectStore(self._s3, self.settings.bucket), self.clock)

    @functools.cached_property
    def trace_reader(self) -> TraceReader:
        """A message's trace events, by topic and id."""
        return TraceReader(
            topics=self.catalog,
            store=TraceObjectStore(self._s3, self.settings.bucket),
            lookup=self.lookup,
            clock=self.clock,
        )

    # ------------------------------------------------------------ delayed messages
    @functools.cached_property
    def delay_items(self) -> DelayItemStore:
        return DelayItemStore(self._dynamodb, self.settings.timers_table)

    @functools.cached_property
    def delay_objects(self) -> DelayObjectStore:
        return DelayObjectStore(self._s3, self.settings.bucket)

    @functools.cached_property
    def delay_writer(self) -> DelayWriter | None:
        """Schedules a send's delayed messages (None: no delay table configured)."""
        if not self.settings.timers_table:
            return None
        return DelayWriter(objects=self.delay_objects, items=self.delay_items)

    @functools.cached_property
    def delay_release(self) -> DelayRelease:
        """Moves due delayed messages into their topics (the scheduler function runs it)."""
        return DelayRelease(
            items=self.delay_items,
            objects=self.delay_objects,
            topics=self.catalog,
            writer=self.writer,
            clock=self.clock,
            trace=lambda: self.trace,
        )

    @functools.cached_property
    def release_wake(self) -> ReleaseWake | None:
        """Starts a release run for a message due before the next scheduled one."""
        name = self.settings.scheduler_function
        if not name or not self.settings.timers_table:
            return None
        client = functools.partial(aws_client, "lambda", self.settings, quick=True)
        return ReleaseWake(FunctionStarter(client, name), self.clock)

    @functools.cached_property
    def delay_cancel(self) -> DelayCancel:
        return DelayCancel(
            topics=self.catalog,
            items=self.delay_items,
            objects=self.delay_objects,
            clock=self.clock,
        )

    # ------------------------------------------------------------ transactions
    @functools.cached_property
    def transactions(self) -> TransactionService:
        """Half sends, commit / rollback, back-checks. A commit copies half objects (in the
        message bucket) into the topic through the one writer (where batch objects go)."""
        from .services.transactions import TransactionService
        from .storage.half_objects import HalfObjectStore
        from .storage.transactions import TransactionStore

        halves = HalfObjectStore(self._s3, self.settings.bucket)
        store = TransactionStore(self._dynamodb, self.settings.transactions_table)
        wake = self.checker_wake
        return TransactionService(
            store=store,
            halves=halves,
            topics=self.catalog,
            writer=self.writer,
            clock=self.clock,
            records=self.producers,
            wake=None if wake is None else lambda dues: wake.due_at(dues, store.runs),
            trace=lambda: self.trace,
        )

    @functools.cached_property
    def consume_produce(self) -> ConsumeProduceSteps:
        """Exactly-once consume -> produce steps: acks and appends in one transaction."""
        from .services.consume_produce import ConsumeProduceSteps
        from .services.receipt_handles import ReceiptHandles
        from .services.transactions.registration import Registrations
        from .storage.transactions import TransactionStore

        store = TransactionStore(self._dynamodb, self.settings.transactions_table)
        return ConsumeProduceSteps(
            topics=self.catalog,
            writer=self.writer,
            producers=self.producers,
            states=self.states,
            handles=ReceiptHandles(lambda: self.receipt_signer),
            registrations=Registrations(store=store, clock=self.clock),
            transactions=store,
            clock=self.clock,
            delay_writer=self.delay_writer,
            wake=self.release_wake,
            delivery_ended=self.consume.delivery_ended,
        )

    @functools.cached_property
    def checker_wake(self) -> ReleaseWake | None:
        """Starts a checker run for a check due before the next scheduled one."""
        name = self.settings.txn_checker_function
        if not name or not self.settings.transactions_table:
            return None
        client = functools.partial(aws_client, "lambda", self.settings, quick=True)
        return ReleaseWake(FunctionStarter(client, name), self.clock)

    # ------------------------------------------------------------ consuming
    @functools.cached_property
    def receipt_signer(self) -> ReceiptSigner:
        """One signer for every service: a handle made by a receive is known to the ack."""
        return ReceiptSigner(self.settings.receipt_secret)

    @functools.cached_property
    def consume(self) -> ConsumeService:
        return ConsumeService(
            topics=self.catalog,
            index=self.index,
            heads=self.heads,
            reader=self.reader,
            states=self.states,
            views=GroupViewReader(self._dynamodb, self.heads, self.states, self.registry),
            signer=self.receipt_signer,
            clock=self.clock,
            retries=self.retries,
        )

    # ------------------------------------------------------------ retries, dead letters
    @functools.cached_property
    def group_configs(self) -> GroupConfigStore:
        return GroupConfigStore(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def sqs_queues(self) -> SqsQueueStore:
        """The SQS attributes of queues served by the SQS adapter (cirrusmq_api.compat.sqs)."""
        return SqsQueueStore(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def moves(self) -> MoveAppender:
        """Re-publishes messages the broker moves (retry, dead letter, redrive)."""
        return MoveAppender(
            store=self.topic_store,
            writer=self.writer,
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
            signer=lambda: self.receipt_signer,
            clock=self.clock,
        )

    @functools.cached_property
    def move_tasks(self) -> MoveTaskService:
        """Resumable, fenced moves of a group's messages to other topics (SQS move tasks)."""
        return MoveTaskService(
            store=MoveTaskStore(self._dynamodb, self.settings.groups_table),
            consume=self.consume,
            handoff=self.retries.handoff,
            topics=self.catalog,
            clock=self.clock,
        )

    @functools.cached_property
    def dead_letters(self) -> DeadLetterService:
        return DeadLetterService(
            topics=self.catalog,
            moves=self.moves,
            retry_topic=self.retries.retry_topic,
            index=self.index,
            heads=self.heads,
            reader=self.reader,
            configs=self.group_configs,
            clock=self.clock,
            claims=RedriveClaimStore(self._dynamodb, self.settings.producers_table),
        )

    # ------------------------------------------------------------ group metrics
    @functools.cached_property
    def group_catalog(self) -> GroupCatalog:
        """Which groups exist and on which topics (the group list, the group metrics)."""
        return GroupCatalog(self._dynamodb, self.settings.groups_table, self.heads)

    @functools.cached_property
    def group_metrics(self) -> GroupMetricsService:
        return GroupMetricsService(
            catalog=self.group_catalog,
            states=self.states,
            topics=self.topic_store,
            index=self.index,
            clock=self.clock,
        )

    @functools.cached_property
    def group_history(self) -> GroupHistoryService:
        """The group metrics read back from CloudWatch (the console's lag chart)."""
        reader = MetricSeriesReader(aws_client("cloudwatch", self.settings), NAMESPACE)
        return GroupHistoryService(
            catalog=self.group_catalog, reader=reader, service=SERVICE, clock=self.clock
        )

    # ------------------------------------------------------------ consumer membership
    @functools.cached_property
    def registry(self) -> ConsumerRegistry:
        """Consumer registrations, heartbeats and orderly queue locks."""
        return ConsumerRegistry(self._dynamodb, self.settings.groups_table)

    @functools.cached_property
    def membership(self) -> MembershipService:
        return MembershipService(topics=self.catalog, registry=self.registry, clock=self.clock)

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

    # ------------------------------------------------------------ access keys, signatures
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

    # ------------------------------------------------------------ notification channel
    @functools.cached_property
    def _connections(self) -> ConnectionStore:
        return ConnectionStore(self._dynamodb, self.settings.connections_table)

    @functools.cached_property
    def channel(self) -> ChannelService:
        """The WebSocket routes: connect, wait, disconnect."""
        limits = WaitLimits(
            per_connection=self.settings.max_waits_per_connection,
            per_key=self.settings.max_waits_per_key,
        )
        return ChannelService(
            auth=self.auth,
            connections=self._connections,
            clock=self.clock,
            limits=limits,
            closer=lambda: self._poster,
        )

    @functools.cached_property
    def _poster(self) -> ConnectionPoster:
        """The management API of the channel's stage: posts to connections, closes them."""
        client = management_client(
            self.settings.websocket_callback_url,
            self.settings.aws_region,
            local=bool(self.settings.aws_endpoint_url),
        )
        return ConnectionPoster(client)

    @functools.cached_property
    def notifier(self) -> Notifier:
        """Posts "look now" to the connections waiting on topics whose heads moved."""
        return Notifier(
            connections=self._connections,
            poster=self._poster,
            clock=self.clock,
            auth=self.auth,
        )

    # ------------------------------------------------------------ housekeeping
    @functools.cached_property
    def janitor(self) -> JanitorService:
        """Expired objects, orphans, deleted topics' data."""
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


@functools.lru_cache(maxsize=8)
def broker_for(settings: Settings) -> Broker:
    """The process-wide broker for these settings."""
    return Broker(settings)


def current_broker() -> Broker:
    """The broker configured by this process's environment."""
    return broker_for(Settings.from_env())
