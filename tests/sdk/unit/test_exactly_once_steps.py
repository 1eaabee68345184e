"""The SDK's exactly-once steps against a stand-in transport (no service needed)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from cirrusmq import (
    AsyncExactlyOnceProducer,
    ExactlyOnceProducer,
    Message,
    MessageView,
    TransportError,
)


class StandIn:
    """Answers the registration and the steps as the service does: receipts in the order of
    the request's messages (grouped by output topic). ``lose`` answers are lost."""

    def __init__(self, lose: int = 0) -> None:
        self.steps: list[dict[str, Any]] = []
        self.lose = lose

    def request(self, method: str, path: str, *, json_body: Any = None, **_: Any) -> Any:
        if path.endswith("/producers"):
            return {"epoch": 3}
        self.steps.append(json_body)
        if self.lose:
            self.lose -= 1
            raise TransportError("the answer was lost", retriable=True)
        receipts = [
            {"message_id": m["message_id"], "queue": 0, "offset": n}
            for n, m in enumerate(m for o in json_body["outputs"] for m in o["messages"])
        ]
        acked = len(json_body["receipt_handles"])
        return {"receipts": receipts, "acked": acked, "duplicate": len(self.steps) > 1}

    def close(self) -> None:
        pass


CONSUMER = SimpleNamespace(group="enricher")


def received(handle: str) -> MessageView:
    return MessageView(
        message_id="m",
        topic="in",
        body=b"",
        tag=None,
        keys=(),
        properties={},
        message_group=None,
        queue=0,
        offset=0,
        born_timestamp=0,
        stored_timestamp=0,
        receipt_handle=handle,
    )


def test_receipts_come_back_in_the_order_the_messages_were_sent_across_topics():
    transport = StandIn()
    producer = ExactlyOnceProducer("http://x", producer_group="pg", transport=transport)
    with producer.exactly_once(CONSUMER) as step:
        step.send(Message("a", b"1"))
        step.send(Message("b", b"2"))
        step.send(Message("a", b"3"))
        step.ack(received("h1"))

    [body] = transport.steps
    assert [o["topic"] for o in body["outputs"]] == ["a", "b"]
    assert (body["epoch"], body["sequence"], body["receipt_handles"]) == (3, 0, ["h1"])
    ids = [m["message_id"] for o in body["outputs"] for m in o["messages"]]
    assert [r.message_id for r in step.result.receipts] == [ids[0], ids[2], ids[1]]
    assert [r.topic for r in step.result.receipts] == ["a", "b", "a"]


def test_a_commit_sent_again_after_a_lost_answer_is_the_same_step():
    transport = StandIn(lose=1)
    producer = ExactlyOnceProducer("http://x", producer_group="pg", transport=transport)
    step = producer.exactly_once(CONSUMER)
    step.send(Message("a", b"1"))
    step.ack("h1")
    with pytest.raises(TransportError):
        step.commit()
    assert step.commit().duplicate  # the application commits again
    assert transport.steps[0] == transport.steps[1]  # same sequence, ids and handles

    with producer.exactly_once(CONSUMER) as later:
        later.ack("h2")
    assert transport.steps[2]["sequence"] == 1


def test_a_step_left_by_an_exception_sends_nothing_and_takes_nothing_more():
    transport = StandIn()
    producer = ExactlyOnceProducer("http://x", producer_group="pg", transport=transport)
    with pytest.raises(RuntimeError), producer.exactly_once(CONSUMER) as step:
        step.send(Message("a", b"1"))
        raise RuntimeError("the stage failed")
    assert transport.steps == [] and step.state == "ABORTED"
    with pytest.raises(Exception, match="aborted"):
        step.send(Message("a", b"2"))


class AsyncStandIn(StandIn):
    async def request(self, method: str, path: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return StandIn.request(self, method, path, **kwargs)

    async def close(self) -> None:  # type: ignore[override]
        pass


def test_a_step_that_sent_and_acked_nothing_commits_without_a_request():
    """The service refuses an empty step (400): a clean exit of a step that chose to do
    nothing is no error and takes no sequence."""
    transport = StandIn()
    producer = ExactlyOnceProducer("http://x", producer_group="pg", transport=transport)
    with producer.exactly_once(CONSUMER) as step:
        pass
    assert transport.steps == []
    assert (step.result.receipts, step.result.acked, step.result.duplicate) == ([], 0, False)
    with producer.exactly_once(CONSUMER) as step:
        step.ack("h1")
    assert transport.steps[0]["sequence"] == 0


def test_an_async_step_that_sent_and_acked_nothing_commits_without_a_request():
    async def run() -> tuple[AsyncStandIn, Any]:
        transport = AsyncStandIn()
        producer = AsyncExactlyOnceProducer("http://x", producer_group="pg", transport=transport)
        await producer.start()
        async with producer.exactly_once(CONSUMER) as step:
            pass
        return transport, step

    transport, step = asyncio.run(run())
    assert transport.steps == []
    assert step.result is not None and step.result.receipts == []
