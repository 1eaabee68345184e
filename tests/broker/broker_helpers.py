"""Small helpers shared by the broker unit tests."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput, MessageType
from cirrusmq_broker.storage.clients import observe_calls


def send(broker: Broker, topic: str, *bodies: bytes, **fields) -> list:
    return broker.produce.send(topic, [MessageInput(b, **fields) for b in bodies]).receipts


def object_keys(broker: Broker) -> list[str]:
    s3 = boto3.client("s3", region_name="us-east-1")
    listed = s3.list_objects_v2(Bucket=broker.settings.bucket).get("Contents", [])
    return [o["Key"] for o in listed]


def index_items(broker: Broker) -> list[dict]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    return ddb.scan(TableName=broker.settings.log_index_table)["Items"]


def statuses(broker: Broker, group: str) -> list:
    """Per-queue statuses of a group (describe_group without the subscriptions)."""
    return broker.consume.describe_group(group).queues


def ack_statuses(broker: Broker, group: str, handles: list[str]) -> list[str]:
    """The per-handle status of an ack: 'acked', 'expired' or 'invalid'."""
    return [outcome.status.value for outcome in broker.consume.ack(group, handles)]


def create_fifo_topic(broker: Broker, name: str, queues: int = 1) -> None:
    """A FIFO topic: its expired leases are redelivered in place, one delivery in flight
    per queue (other topics move an expired lease's messages to the retry topic). Its
    messages need a message group (``send(..., message_group="k")``)."""
    broker.admin.create_topic(name, queues=queues, message_type=MessageType.FIFO.value)


@contextmanager
def lagging_index_reads(client: Any, table: str, hidden: set[tuple[str, int]]) -> Iterator[None]:
    """Eventually consistent Queries of the log index ``table`` through ``client`` miss the
    batches ``hidden`` names ((stream, base offset)), as a read served by a replica that has
    not seen a batch appended a moment ago does; consistent reads see everything."""

    def mark(params: dict, context: dict, **_: Any) -> None:
        context["lagging"] = params.get("TableName") == table and not params.get("ConsistentRead")

    def hide(parsed: dict, context: dict, **_: Any) -> None:
        if context.get("lagging") and "Items" in parsed:
            parsed["Items"] = [
                item
                for item in parsed["Items"]
                if (item["stream"]["S"], int(item["base_offset"]["N"])) not in hidden
            ]
            parsed["Count"] = len(parsed["Items"])

    events = client.meta.events
    events.register("before-parameter-build.dynamodb.Query", mark, unique_id="lagging-mark")
    events.register("after-call.dynamodb.Query", hide, unique_id="lagging-hide")
    try:
        yield
    finally:
        events.unregister("before-parameter-build.dynamodb.Query", unique_id="lagging-mark")
        events.unregister("after-call.dynamodb.Query", unique_id="lagging-hide")


@contextmanager
def hooked(client: Any, event: str, handler: Callable[..., Any]) -> Iterator[None]:
    """``handler`` on ``client``'s botocore ``event`` while the block runs."""
    client.meta.events.register(event, handler)
    try:
        yield
    finally:
        client.meta.events.unregister(event, handler)


@contextmanager
def resent_put(client: Any, table: str) -> Iterator[list[int]]:
    """The first put into ``table`` lands, its answer is lost and botocore sends it again:
    the caller sees the second answer (the item is there). Yields a list that is not empty
    once that happened."""
    landed: list[int] = []

    def put_first(params: dict, **_: object) -> None:
        if not landed and params.get("TableName") == table:
            landed.append(1)
            client.put_item(**params)

    with hooked(client, "before-parameter-build.dynamodb.PutItem", put_first):
        yield landed


@contextmanager
def lagging_item_reads(client: Any, table: str) -> Iterator[None]:
    """Eventually consistent GetItems of ``table`` through ``client`` find nothing, as a read
    served by a replica that has not seen the item's write yet does; consistent reads see
    the item."""

    def mark(params: dict, context: dict, **_: Any) -> None:
        context["lagging"] = params.get("TableName") == table and not params.get("ConsistentRead")

    def hide(parsed: dict, context: dict, **_: Any) -> None:
        if context.get("lagging"):
            parsed.pop("Item", None)

    events = client.meta.events
    events.register("before-parameter-build.dynamodb.GetItem", mark, unique_id="lagging-get")
    events.register("after-call.dynamodb.GetItem", hide, unique_id="lagging-get-hide")
    try:
        yield
    finally:
        events.unregister("before-parameter-build.dynamodb.GetItem", unique_id="lagging-get")
        events.unregister("after-call.dynamodb.GetItem", unique_id="lagging-get-hide")


def serialised_aws_calls(monkeypatch: Any) -> None:
    """One AWS call at a time, as DynamoDB applies each write atomically: moto's in-process
    backend checks a condition and applies a write in separate Python steps, so threads
    racing through it could both pass one condition."""
    from botocore.client import BaseClient

    lock, real = threading.RLock(), BaseClient._make_api_call

    def call(client: Any, operation: str, params: dict) -> Any:
        with lock:
            return real(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)


class DynamoAnswer:
    """An HTTP answer of DynamoDB as botocore's ``before-call`` short-circuit takes it."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


def cancellation(*reasons: str) -> tuple[DynamoAnswer, dict]:
    """What DynamoDB answers a TransactWriteItems it cancelled for ``reasons`` (per item)."""
    parsed = {
        "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
        "CancellationReasons": [{"Code": code} for code in reasons],
    }
    return DynamoAnswer(400), parsed


@contextmanager
def transactions_cancelled(client, *reasons: str, times: int = 1) -> Iterator[list[str]]:
    """The next ``times`` TransactWriteItems of ``client`` are cancelled for ``reasons``
    (what a concurrent write to their items makes DynamoDB answer); yields the calls seen."""
    calls: list[str] = []

    def cancel(params, **_):
        calls.append("cancelled" if len(calls) < times else "sent")
        return cancellation(*reasons) if calls[-1] == "cancelled" else None

    with hooked(client, "before-call.dynamodb.TransactWriteItems", cancel):
        yield calls


def count_calls() -> tuple[Counter, callable]:
    """AWS calls made from now on, counted by ``service.Operation``; ``remove()`` stops it."""
    calls: Counter = Counter()
    remove = observe_calls(lambda service, operation, _: calls.update([f"{service}.{operation}"]))
    return calls, remove


class Crash(BaseException):
    """The process dies here (not an error any code catches)."""


def commit_then_crash(monkeypatch: Any, broker: Broker, request: Any) -> None:
    """Run the exactly-once step ``request`` to its commit, then crash (the appender's
    transaction landed, the answer never left): raises nothing, the patch is undone."""
    from cirrusmq_broker.storage.appends import BatchAppender

    commit = BatchAppender.append_streams

    def committed_then_dead(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        commit(self, *args, **kwargs)
        raise Crash()

    monkeypatch.setattr(BatchAppender, "append_streams", committed_then_dead)
    try:
        broker.consume_produce.commit(request)
    except Crash:
        pass
    else:
        raise AssertionError("the step did not reach its commit")
    finally:
        monkeypatch.undo()


def crashing_at(n: int, action: Callable[[], object]) -> bool:
    """Run ``action`` dying before its ``n``-th AWS call; True if it died."""
    count = itertools.count()

    def observer(service: str, operation: str, _: object) -> None:
        if next(count) == n:
            raise Crash()

    remove = observe_calls(observer)
    try:
        action()
    except Crash:
        return True
    finally:
        remove()
    return False


def dead_letter_two(broker: Broker, topic: str = "t", group: str = "g") -> None:
    """A 1-queue ``topic`` whose two messages ``group`` (one delivery allowed) received and
    nacked: both are its dead letters."""
    broker.admin.create_topic(topic, queues=1)
    broker.retries.set_max_delivery_attempts(group, 1)
    send(broker, topic, b"a", b"b")
    got = broker.consume.receive(group, topic, max_messages=10)
    broker.retries.nack(group, [m.receipt_handle for m in got])


def sent_and_redriven(broker: Broker, topic: str, group: str = "g") -> int:
    """Messages stored in ``topic`` plus the dead letters redriven to ``group`` (appended
    to its retry topic's redrive queue)."""
    from cirrusmq_broker.rules.retries import REDRIVE_QUEUE, retry_topic

    redriven = stream_count(broker, f"{retry_topic(group, topic)}#{REDRIVE_QUEUE}")
    return stream_count(broker, f"{topic}#") + redriven


def stream_count(broker: Broker, prefix: str) -> int:
    """Messages indexed in streams whose name starts with ``prefix``."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    pages = ddb.get_paginator("scan").paginate(TableName=broker.settings.log_index_table)
    return sum(
        int(item["count"]["N"])
        for page in pages
        for item in page["Items"]
        if item["stream"]["S"].startswith(prefix)
    )
