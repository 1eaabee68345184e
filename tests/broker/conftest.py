"""Broker fixtures: the broker's stores on in-process moto, tables built from template.yaml;
``broker_helpers`` (beside this file) has the helpers the tests import."""

from __future__ import annotations

import datetime as dt
import os
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import moto.s3.models as moto_s3
import pytest
from cirrusmq_broker import clock as broker_clock
from cirrusmq_broker.container import Broker
from cirrusmq_broker.settings import Settings
from cirrusmq_local.in_process import broker_settings
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(autouse=True)
def broker_clock_at_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests run on wall time: a local stack of the same test session may have advanced
    the process's broker clock (it comes back after each test)."""
    monkeypatch.setattr(broker_clock, "_offset_ms", 0)


class FakeClock:
    """Milliseconds since the epoch, moved by hand."""

    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


_MOTO_REQUESTS = threading.Lock()
_PROCESS_REQUEST = BotocoreStubber.process_request


def _one_request_at_a_time(self: BotocoreStubber, request: object) -> object:
    """moto's in-process request handler, one request at a time: moto keeps its data in plain
    dicts (a transaction deep-copies the tables it touches, a query iterates one), and the
    broker's services call AWS from several threads (parallel queue moves and reads)."""
    with _MOTO_REQUESTS:
        return _PROCESS_REQUEST(self, request)  # type: ignore[arg-type]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process moto, its requests serialised as the local stack's server does."""
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(BotocoreStubber, "process_request", _one_request_at_a_time)
    with mock_aws():
        yield


@pytest.fixture
def settings(aws: None) -> Settings:
    return broker_settings(
        TEMPLATE, receipt_secret="unit-test-secret-0123456789abcdef", leases_on_summary=True
    )


@pytest.fixture
def broker(settings: Settings, clock: FakeClock) -> Broker:
    return Broker(settings, clock)


@pytest.fixture
def s3_clock(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """S3 LastModified follows the broker's FakeClock, plus ``lag_ms`` (as S3's clock and
    the broker's agree on AWS; the janitor judges objects by their write time)."""
    state = types.SimpleNamespace(lag_ms=0)

    def utcnow() -> dt.datetime:
        moment = dt.datetime.fromtimestamp((clock.now + state.lag_ms) / 1000, tz=dt.UTC)
        return moment.replace(tzinfo=None)

    monkeypatch.setattr(moto_s3, "utcnow", utcnow)
    return state
