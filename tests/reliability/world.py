"""The broker under test, in-process: tables and bucket from template.yaml on moto, two
containers (separate caches) and an observer, one fake clock, inline worker pools."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import boto3
from cirrusmq_broker.container import Broker
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.clients import aws_client
from cirrusmq_local.resolver import Resolver, resolve_parameters
from cirrusmq_local.resources import create_resources
from cirrusmq_local.template import load_template
from faults import INJECTOR
from moto import mock_aws

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
START_MS = 1_790_000_000_000


class FakeClock:
    """Milliseconds since the epoch, moved by hand (never backwards)."""

    def __init__(self, start_ms: int = START_MS) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

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
    """One moto backend per process, its tables and bucket created once from template.yaml
    (a history names its own topics and groups: histories do not see each other)."""

    _current: Backend | None = None

    def __init__(self) -> None:
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        self._mock = mock_aws()
        self._mock.start()
        self.settings = _settings()
        for service in ("dynamodb", "s3"):
            INJECTOR.install(aws_client(service, self.settings))
        self.clock = FakeClock()
        self.histories = 0

    @classmethod
    def get(cls) -> Backend:
        if cls._current is None:
            cls._current = Backend()
        return cls._current

    @classmethod
    def stop(cls) -> None:
        if cls._current is not None:
            cls._current._mock.stop()
            cls._current = None


class World:
    """One history: its name prefix, a clock started on a 10-minute boundary past the last
    history's time, two containers and an observer over the shared backend."""

    def __init__(self) -> None:
        backend = Backend.get()
        backend.histories += 1
        self.prefix = f"h{backend.histories}-"
        self.settings = backend.settings
        self.clock = backend.clock
        self.clock.now = (self.clock.now // 600_000 + 1) * 600_000
        self.start = self.clock.now
        self.brokers = [self.fresh(), self.fresh()]
        self.observer = self.fresh()
        """Reads for the checks: its caches are not the ones under test."""

    def name(self, logical: str) -> str:
        """The history's own name of a topic or group."""
        return self.prefix + logical

    def fresh(self) -> Broker:
        """A new container (a new process: empty caches)."""
        broker = Broker(self.settings, self.clock)
        broker.produce._uploads = INLINE
        broker.scheduler._pool = INLINE
        broker.scheduler._queries = INLINE
        return broker

    def restart(self, index: int) -> None:
        """Container ``index`` died: the next request reaches a new one."""
        self.brokers[index] = self.fresh()

    def close(self) -> None:
        self.brokers.clear()


def _settings() -> Settings:
    template = load_template(TEMPLATE)
    resolver = Resolver(template, resolve_parameters(template))
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    names = create_resources(
        ddb,
        boto3.client("s3", region_name="us-east-1"),
        template,
        resolver,
        kms=boto3.client("kms", region_name="us-east-1"),
    )
    settings = Settings(
        topics_table=names["TopicsTable"],
        log_index_table=names["LogIndexTable"],
        groups_table=names["GroupsTable"],
        producers_table=names["ProducersTable"],
        queue_heads_table=names["QueueHeadsTable"],
        bucket=names["MessageBucket"],
        access_keys_table=names["AccessKeysTable"],
        nonces_table=names["NoncesTable"],
        secrets_key_id=names["AccessKeySecretsKey"],
        receipt_secret="reliability-secret-0123456789abcdef",
        aws_region="us-east-1",
        timers_table=names["TimersTable"],
        transactions_table=names["TransactionsTable"],
    )
    return dataclasses.replace(settings)
