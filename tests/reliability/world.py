"""The broker under test, in-process: tables and bucket from template.yaml on moto, two
containers (separate caches) and an observer, one fake clock, inline worker pools."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from botocore import UNSIGNED
from cachetools import TTLCache
from cirrusmq_broker.container import Broker
from cirrusmq_broker.rules.retries import dlq_topic
from cirrusmq_broker.services import log_reader
from cirrusmq_broker.services.dead_letters import DeadLetter
from cirrusmq_broker.services.delivery import queue_plan, receive
from cirrusmq_broker.services.moves import INTERNAL_TOPIC_CACHE_SECONDS
from cirrusmq_broker.services.retries.settings import CONFIG_CACHE_SECONDS
from cirrusmq_broker.services.topic_catalog import TOPIC_CACHE_SECONDS
from cirrusmq_broker.services.transactions import checks as transaction_checks
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.clients import aws_client
from cirrusmq_local.in_process import broker_settings
from faults import INJECTOR
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.model_instances import reset_model_data
from moto.dynamodb.models import dynamodb_backends
from moto.s3.models import s3_backends

_TIMED_MODULES = (receive, queue_plan, log_reader, transaction_checks)
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
START_MS = 1_790_000_000_000
REGION = "us-east-1"
PARTITION = "aws"
"""moto keeps S3 buckets per partition."""


class FakeClock:
    """Milliseconds since the epoch, moved by hand (never backwards)."""

    def __init__(self, start_ms: int = START_MS) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

    def seconds(self) -> float:
        return self.now / 1000

    def until(self, when_ms: int) -> None:
        """A scheduler's sleep: time passes up to ``when_ms``."""
        self.now = max(self.now, when_ms)


class Inline:
    """A worker pool that runs its work on the caller's thread (moto in-process is not
    thread-safe, the histories stay deterministic, and a fault hits the operation)."""

    def map(self, fn: Any, *iterables: Any) -> list[Any]:
        return list(map(fn, *iterables))

    def shutdown(self, *_: Any, **__: Any) -> None:
        pass


INLINE = Inline()


class Backend:
    """One moto backend per process, its tables and bucket made from template.yaml once;
    every history starts on it emptied (no state carries over from one history to the
    next, so a shrunk history replays the same)."""

    _current: Backend | None = None

    def __init__(self) -> None:
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        self._mock = mock_aws()
        self._mock.start()
        try:
            self.settings = _settings()
        except BaseException:
            self._mock.stop()
            raise
        for service in ("dynamodb", "s3"):
            INJECTOR.install(aws_client(service, self.settings))
        self._dynamodb = aws_client("dynamodb", self.settings)
        self._dynamodb.meta.events.register_first(
            "choose-signer.*.*", _unsigned, unique_id=_UNSIGNED_ID
        )
        for table in dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables.values():
            table.stream_shard = None  # no stream reader runs in-process: keep no records

    @classmethod
    def fresh(cls) -> Backend:
        """The process's backend, with no item in any table and no object in the bucket."""
        if cls._current is None:
            cls._current = Backend()
        else:
            cls._current.empty()
        return cls._current

    def empty(self) -> None:
        """Delete every item and object: what a new backend holds (the tables, the bucket
        and the keys stay as template.yaml made them)."""
        for table in dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables.values():
            table.items.clear()
        for bucket in s3_backends[DEFAULT_ACCOUNT_ID][PARTITION].buckets.values():
            for versions in bucket.keys.lists():
                for key in versions[1]:
                    key.dispose()
            for multipart in bucket.multiparts.values():
                multipart.dispose()
            bucket.keys.clear()
            bucket.multiparts.clear()
        reset_model_data()  # moto's list of every model made (items, objects, records)

    @classmethod
    def stop(cls) -> None:
        """The end of a run: the mock stops (the next history builds a new backend)."""
        _BrokerTime.uninstall()
        if cls._current is not None:
            cls._current._dynamodb.meta.events.unregister(
                "choose-signer.*.*", unique_id=_UNSIGNED_ID
            )
            cls._current._mock.stop()
            cls._current = None


class _BrokerTime:
    """The broker's own waits and caches run on the wall clock (``time.monotonic``,
    cachetools' TTLCache): in a history they run on its fake clock instead, so that a
    history does the same however fast the machine runs it, and cached entries expire as
    its time passes."""

    saved: dict[Any, Any] = {}

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock

    def monotonic(self) -> float:
        return self._clock() / 1000

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @classmethod
    def install(cls, clock: FakeClock) -> None:
        shim = cls(clock)
        for module in _TIMED_MODULES:
            cls.saved.setdefault(module, module.time)
            module.time = shim

    @classmethod
    def uninstall(cls) -> None:
        for module, original in cls.saved.items():
            module.time = original
        cls.saved.clear()


class World:
    """One history: an emptied backend, a fake clock, two containers and an observer."""

    def __init__(self) -> None:
        self.backend = Backend.fresh()
        self.settings = self.backend.settings
        self.clock = FakeClock()
        self.start = self.clock.now
        _BrokerTime.install(self.clock)
        self.brokers = [self.fresh(), self.fresh()]
        self.observer = self.fresh()
        """Reads for the checks: its caches are not the ones under test."""
        self._letters_read: dict[str, int] = {}
        """Group → the DLQ offset the next listing of its new letters starts from."""

    def name(self, logical: str) -> str:
        """A topic's or group's name (kept: the backend is emptied per history)."""
        return logical

    def fresh(self) -> Broker:
        """A new container (a new process: empty caches), its worker pools inline and its
        caches on the history's clock."""
        broker = Broker(self.settings, self.clock)
        broker.produce._uploads = INLINE
        broker.delay_release._pool = INLINE
        broker.delay_release._queries = INLINE
        timer = self.clock.seconds
        broker.catalog._cache = TTLCache(maxsize=4096, ttl=TOPIC_CACHE_SECONDS, timer=timer)
        broker.moves._topics = TTLCache(maxsize=4096, ttl=INTERNAL_TOPIC_CACHE_SECONDS, timer=timer)
        broker.retries.settings._max = TTLCache(maxsize=4096, ttl=CONFIG_CACHE_SECONDS, timer=timer)
        return broker

    def restart(self, index: int) -> None:
        """Container ``index`` died: the next request reaches a new one."""
        self.brokers[index] = self.fresh()

    # ------------------------------------------------------------------ observer reads
    def new_dead_letters(self, group: str) -> list[DeadLetter]:
        """The group's dead letters the previous calls did not return, as the observer lists
        them: a DLQ only grows (nothing in a history purges one), so each listing starts
        after the last letter read, and none is made before the observer sees the DLQ
        topic (the listing would answer none too)."""
        observer = self.observer
        if observer.moves.existing(dlq_topic(group)) is None:
            return []
        start = self._letters_read.get(group, 0)
        letters = observer.dead_letters.list(group, limit=100, start=start).dead_letters
        if letters:
            self._letters_read[group] = letters[-1].offset + 1
        return letters

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, queue) → the group's committed offset as stored (what ``describe_group``
        answers as ``committed_offset``, without its reads of the queue heads)."""
        states, _ = self.observer.states.list_group(group)
        return {(state.topic, state.queue): state.settled_offset() for state in states}

    def close(self) -> None:
        self.brokers.clear()
        _BrokerTime.uninstall()


_UNSIGNED_ID = "reliability-unsigned"


def _unsigned(**_: Any) -> object:
    """moto's DynamoDB checks no signature: the broker's requests to it go unsigned (SigV4
    costs about a tenth of a request's time; moto's S3 refuses anonymous reads)."""
    return UNSIGNED


def _settings() -> Settings:
    return broker_settings(
        TEMPLATE,
        receipt_secret="reliability-secret-0123456789abcdef",
        tables={"timers_table": "TimersTable", "transactions_table": "TransactionsTable"},
        leases_on_summary=True,
    )
