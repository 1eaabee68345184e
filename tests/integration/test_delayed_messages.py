"""Delayed messages through a local stack with its schedules running (the delay scheduler
parks on the broker clock; ``advance_time`` wakes it): every level and absolute times
arrive on time and never early, cancel, bad input, the sweeper spares timer objects."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from api_helpers import signed_client
from cirrusmq import (
    Admin,
    ConflictError,
    FilterExpression,
    Message,
    NotFoundError,
    Producer,
    SimpleConsumer,
    signing,
)
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock
from cirrusmq_broker.rules.delays import DELAY_LEVELS_S


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with (
        pytest.MonkeyPatch.context() as patch,
        LocalStack(schedules=True, expire_interval=None) as running,
    ):
        # The SDK signs with this machine's clock; the service checks the date against the
        # broker clock, which these tests move by hours: sign with the broker clock.
        plain = signing.format_date
        patch.setattr(
            signing,
            "format_date",
            lambda now=None: plain(clock.now_ms() / 1000 if now is None else now),
        )
        yield running


@pytest.fixture
def topic(stack) -> str:
    name = f"d-{uuid.uuid4().hex[:10]}"
    with Admin(stack.endpoint, stack.credentials) as admin:
        admin.create_topic(name, queues=2)
    return name


def consumer(stack: LocalStack, topic: str) -> SimpleConsumer:
    group = f"g-{uuid.uuid4().hex[:10]}"
    return SimpleConsumer(
        stack.endpoint, stack.credentials, group, {topic: FilterExpression.ALL}, await_duration=0
    )


def drain(c: SimpleConsumer) -> list[str]:
    got = c.receive(1000, 60)
    if got:
        c.ack_batch(got)
    return sorted(m.message_id for m in got)


def advance_to(stack: LocalStack, moment_ms: int) -> None:
    stack.advance_time(max(0, moment_ms - clock.now_ms()) / 1000)


def test_every_level_and_absolute_times_arrive_on_time_never_early(stack, topic):
    now = clock.now_ms()
    messages = [Message(topic, f"level {n}", delay_level=n) for n in range(1, 19)]
    messages += [
        Message(topic, "at +7s", delivery_timestamp=now + 7_000),
        Message(topic, "at +45m", delivery_timestamp=now + 45 * 60_000),
        Message(topic, "past due", delivery_timestamp=now - 1_000),
    ]
    with Producer(stack.endpoint, stack.credentials) as producer:
        receipts = producer.send_batch(messages)
    assert not receipts[-1].scheduled and receipts[-1].offset is not None
    scheduled = [r for r in receipts if r.scheduled]
    assert len(scheduled) == 20
    for receipt, seconds in zip(scheduled, DELAY_LEVELS_S, strict=False):
        assert receipt.delivery_timestamp - now >= seconds * 1000 - 50
    due_of = {r.message_id: r.delivery_timestamp for r in scheduled}
    received: set[str] = set()

    def take(c: SimpleConsumer) -> None:
        got = drain(c)
        now = clock.now_ms()
        early = [m for m in got if due_of.get(m, 0) > now]
        assert not early, f"delivered before their due time: {early}"
        received.update(got)

    with consumer(stack, topic) as c:
        take(c)  # past due: at once (others only once real time reached their due time)
        assert receipts[-1].message_id in received
        received.discard(receipts[-1].message_id)
        for due in sorted(set(due_of.values())):
            if clock.now_ms() < due - 1:
                advance_to(stack, due - 1)
                take(c)  # the ones of `due` only if real time reached it meanwhile
            advance_to(stack, due)
            take(c)
            assert {m for m, d in due_of.items() if d <= due} <= received, f"late at {due}"
        assert received == set(due_of) and drain(c) == []


def test_cancel_before_due_is_idempotent_then_409_after_delivery(stack, topic):
    with Producer(stack.endpoint, stack.credentials) as producer:
        keep, drop = producer.send_batch(
            [Message(topic, "keep", delay_level=3), Message(topic, "drop", delay_level=3)]
        )
        producer.cancel_scheduled(drop)
        producer.cancel_scheduled(drop)
        with pytest.raises(NotFoundError):
            producer.cancel_scheduled(topic, "no-such-id", drop.delivery_timestamp)
        with consumer(stack, topic) as c:
            advance_to(stack, keep.delivery_timestamp)
            assert drain(c) == [keep.message_id]
            advance_to(stack, keep.delivery_timestamp + 5_000)
            assert drain(c) == []
        producer.cancel_scheduled(drop)  # still fine once its time passed
        with pytest.raises(ConflictError):
            producer.cancel_scheduled(keep)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"delay_level": 0}, "InvalidDelay"),
        ({"delay_level": 19}, "InvalidDelay"),
        ({"delay_level": 2, "delivery_timestamp": 1}, "InvalidDelay"),
        ({"delivery_timestamp": "366d"}, "InvalidDelay"),
    ],
)
def test_bad_delays_are_400_and_store_nothing(stack, topic, fields, code):
    if fields.get("delivery_timestamp") == "366d":
        fields = {"delivery_timestamp": clock.now_ms() + 366 * 86_400_000}
    with signed_client(stack) as api:
        response = api.post(
            f"/v1/topics/{topic}/messages", json={"messages": [{"body": "eA==", **fields}]}
        )
    assert response.status_code == 400 and response.json()["code"] == code
    assert _stored(stack, topic) == (0, 0)


def test_fifo_topic_refuses_delays(stack):
    name = f"f-{uuid.uuid4().hex[:10]}"
    with Admin(stack.endpoint, stack.credentials) as admin:
        admin.create_topic(name, queues=1, message_type="FIFO")
    with signed_client(stack) as api:
        response = api.post(
            f"/v1/topics/{name}/messages",
            json={"messages": [{"body": "eA==", "message_group": "g", "delay_level": 1}]},
        )
    assert response.status_code == 400 and response.json()["code"] == "DelayNotAllowed"
    assert _stored(stack, name) == (0, 0)


def test_the_orphan_sweeper_spares_timer_objects(stack, topic):
    with Producer(stack.endpoint, stack.credentials) as producer:
        producer.send(Message(topic, "in two hours", delay_level=18))
    s3 = stack.boto3_client("s3")
    bucket = stack.resources["MessageBucket"]
    mine = _timer_objects_of(stack, topic)  # other tests' timers may fall due meanwhile
    assert mine and mine <= _timer_keys(s3, bucket)
    clock.advance(600)  # older than the sweeper's grace
    stack.invoke("JanitorFunction", {"task": "sweep_orphans"})
    assert mine <= _timer_keys(s3, bucket)


def _timer_keys(s3, bucket: str) -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="timers/")
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def _timer_objects_of(stack: LocalStack, topic: str) -> set[str]:
    ddb = stack.boto3_client("dynamodb")
    pages = ddb.get_paginator("scan").paginate(TableName=stack.resources["TimersTable"])
    items = [i for page in pages for i in page["Items"]]
    return {i["object_key"]["S"] for i in items if i.get("topic", {}).get("S") == topic}


def _stored(stack: LocalStack, topic: str) -> tuple[int, int]:
    """(timer items of ``topic``, topic objects) stored."""
    ddb = stack.boto3_client("dynamodb")
    items = ddb.scan(TableName=stack.resources["TimersTable"])["Items"]
    timers = sum(1 for i in items if i.get("topic", {}).get("S") == topic)
    s3 = stack.boto3_client("s3")
    listed = s3.list_objects_v2(
        Bucket=stack.resources["MessageBucket"], Prefix=f"topics/topic={topic}/"
    ).get("Contents", [])
    return timers, len(listed)


def test_async_producer_sends_and_cancels_delayed_messages(stack, topic, tmp_path):
    import asyncio

    from cirrusmq import AsyncProducer

    async def scenario() -> tuple:
        async with AsyncProducer(
            stack.endpoint, stack.credentials, outbox_path=tmp_path / "outbox.db"
        ) as producer:
            kept = await producer.send(Message(topic, "kept", delay_level=2))
            gone = await producer.send(
                Message(topic, "gone", delivery_timestamp=clock.now_ms() + 60_000)
            )
            await producer.cancel_scheduled(gone)
            return kept, gone

    kept, gone = asyncio.run(scenario())
    assert kept.scheduled and gone.scheduled
    with consumer(stack, topic) as c:
        advance_to(stack, gone.delivery_timestamp)
        assert drain(c) == [kept.message_id]
