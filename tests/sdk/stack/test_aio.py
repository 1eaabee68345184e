"""AsyncProducer and AsyncSimpleConsumer against the local stack."""

from __future__ import annotations

import asyncio

import pytest
from cirrusmq import (
    AsyncProducer,
    AsyncSimpleConsumer,
    Message,
    NotFoundError,
)
from cirrusmq.transport import AsyncTransport

from .conftest import RequestCounter


def test_async_round_trip(endpoint, credentials, admin, topic, group):
    counter = RequestCounter()

    async def scenario():
        transport = AsyncTransport(
            endpoint, credentials, event_hooks={"request": [_async(counter)]}
        )
        async with AsyncProducer(endpoint, credentials, transport=transport) as producer:
            one = await producer.send(Message(topic, "first", tag="A"))
            futures = [
                await producer.send_async(Message(topic, f"m{i}", tag="B")) for i in range(500)
            ]
            await producer.flush()
            receipts = await asyncio.gather(*futures)
            batch = await producer.send_batch([Message(topic, "x", tag="A"), Message(topic, "y")])
            with pytest.raises(NotFoundError):
                await producer.send(Message("missing-topic-zz", "x"))
        await transport.close()
        assert len({(r.queue, r.offset) for r in [one, *receipts, *batch]}) == 503

        async with AsyncSimpleConsumer(endpoint, credentials, group, {topic: "A"}, 1) as consumer:
            got = await consumer.receive(10, 30)
            assert sorted(m.text for m in got) == ["first", "x"]
            later = await consumer.change_invisible_duration(got[0], 60)
            await consumer.ack(later)
            results, more = await consumer.receive_and_ack(got[1:], 10, 30)  # one request
            assert [r.acked for r in results] == [True] and more == []
            assert await consumer.receive(10, 30) == []
            consumer.unsubscribe(topic)
            assert consumer.subscriptions == {}

        # The A-filter skipped the B messages for that group for good; another group sees them.
        async with AsyncSimpleConsumer(endpoint, credentials, f"{group}-b", [], 1) as consumer:
            consumer.subscribe(topic, "B")
            rest = []
            while len(rest) < 500:
                rest += await consumer.receive(200, 30)
            await consumer.ack_batch(rest)
            assert sorted(m.text for m in rest) == sorted(f"m{i}" for i in range(500))

    asyncio.run(scenario())
    assert counter.sends(topic) < 30
    assert admin.describe_group(group, topic).lag == 0


def _async(hook):
    async def call(request):
        hook(request)

    return call
