"""Per-handle ack results: parsing both response shapes, the ack plan, the consumers' use."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from cirrusmq import (
    AckResult,
    AckStatus,
    AsyncSimpleConsumer,
    BadRequestError,
    MQError,
    ReceiptHandleExpiredError,
    SimpleConsumer,
)
from cirrusmq.consumer.acks import (
    MAX_ACK_HANDLES,
    ack_plan,
    is_per_handle_error,
    parse_ack_response,
)
from cirrusmq.consumer.pending_acks import AckRetrier, MemoryPendingAcks
from cirrusmq.errors import TransportError, error_from_response
from cirrusmq.transport import AsyncTransport, RetryPolicy, Transport

from .fake_group import FakeGroupService


def test_results_are_parsed_in_request_order():
    body = {
        "acked": 2,
        "results": [
            {"receipt_handle": "a", "status": "acked", "code": None, "message": None},
            {
                "receipt_handle": "b",
                "status": "expired",
                "code": "ReceiptHandleExpired",
                "message": "redelivered",
            },
            {"receipt_handle": "c", "status": "invalid", "code": "ForeignReceiptHandle"},
        ],
    }
    assert parse_ack_response(["a", "b", "c"], body) == [
        AckResult("a", AckStatus.ACKED),
        AckResult("b", AckStatus.EXPIRED, "ReceiptHandleExpired", "redelivered"),
        AckResult("c", AckStatus.INVALID, "ForeignReceiptHandle"),
    ]


def test_results_are_matched_by_handle_then_by_position():
    by_handle = {"results": [{"receipt_handle": "b", "status": "acked"}, {"receipt_handle": "a"}]}
    results = parse_ack_response(["a", "b"], by_handle)
    assert [(r.receipt_handle, r.status) for r in results] == [
        ("a", AckStatus.INVALID),  # no status: not a known one
        ("b", AckStatus.ACKED),
    ]
    positional = {"results": [{"status": "acked"}, {"status": "expired"}]}
    assert [r.status for r in parse_ack_response(["x", "y"], positional)] == [
        AckStatus.ACKED,
        AckStatus.EXPIRED,
    ]


def test_the_former_shape_means_all_acked():
    assert parse_ack_response(["a", "b"], {"acked": 2}) == [
        AckResult("a", AckStatus.ACKED),
        AckResult("b", AckStatus.ACKED),
    ]
    assert parse_ack_response(["a"], None)[0].acked


def test_malformed_results_are_a_transport_error():
    with pytest.raises(TransportError):
        parse_ack_response(["a", "b"], {"results": [{"receipt_handle": "a", "status": "acked"}]})
    with pytest.raises(TransportError):
        parse_ack_response(["a"], {"results": "nope"})


def test_unknown_statuses_are_final_failures():
    (result,) = parse_ack_response(["a"], {"results": [{"status": "weird", "code": None}]})
    assert result.status is AckStatus.INVALID and result.final and "weird" in result.message
    (pending,) = parse_ack_response(["a"], {"results": [{"status": "pending"}]})
    assert pending.status is AckStatus.INVALID  # the service never leaves one pending


def test_results_give_the_typed_errors():
    expired = AckResult("h", AckStatus.EXPIRED, "ReceiptHandleExpired", "stale")
    error = expired.error()
    assert isinstance(error, ReceiptHandleExpiredError) and error.receipt_handles == ["h"]
    foreign = AckResult("h", AckStatus.INVALID, "ForeignReceiptHandle").error()
    assert isinstance(foreign, BadRequestError) and foreign.code == "ForeignReceiptHandle"
    assert AckResult("h", AckStatus.INVALID).error().code == "InvalidReceiptHandle"
    assert AckResult("h", AckStatus.ACKED).error() is None
    assert AckResult("h", AckStatus.PENDING).error() is None
    assert not AckResult("h", AckStatus.PENDING).final


def drive(plan, answer):
    """Run an ack plan, answering each chunk with ``answer(chunk)``; (chunks, results)."""
    chunks = []
    try:
        chunk = next(plan)
        while True:
            chunks.append(chunk)
            chunk = plan.send(answer(chunk))
    except StopIteration as done:
        return chunks, done.value


def test_the_plan_chunks_and_keeps_the_order():
    handles = [f"h{i}" for i in range(2500)] + ["h0"]  # a duplicate is acked once
    chunks, results = drive(ack_plan(handles), lambda chunk: {"acked": len(chunk)})
    assert [len(c) for c in chunks] == [MAX_ACK_HANDLES, MAX_ACK_HANDLES, 500]
    assert [r.receipt_handle for r in results] == handles and all(r.acked for r in results)


def legacy(chunk):
    """A former-shape service: stale handles named, malformed ones not."""
    stale = [h for h in chunk if h.startswith("stale")]
    if stale:
        return error_from_response(
            400, {"code": "ReceiptHandleExpired", "details": {"receipt_handles": stale}}
        )
    if any(h.startswith("bad") for h in chunk):
        return error_from_response(400, {"code": "InvalidReceiptHandle", "message": "bad"})
    return {"acked": len(chunk)}


def test_the_plan_resolves_former_all_or_nothing_refusals():
    handles = ["h0", "stale-1", "h1", "bad-1", "h2", "h3", "bad-2"]
    chunks, results = drive(ack_plan(handles), legacy)
    statuses = {r.receipt_handle: r.status for r in results}
    assert [r.receipt_handle for r in results] == handles
    assert statuses == {
        "h0": AckStatus.ACKED,
        "h1": AckStatus.ACKED,
        "h2": AckStatus.ACKED,
        "h3": AckStatus.ACKED,
        "stale-1": AckStatus.EXPIRED,
        "bad-1": AckStatus.INVALID,
        "bad-2": AckStatus.INVALID,
    }
    assert len(chunks) <= 2 * len(handles)  # halving isolates the unnamed culprits


def test_only_handle_refusals_are_per_handle_errors():
    assert is_per_handle_error(error_from_response(400, {"code": "ForeignReceiptHandle"}))
    assert not is_per_handle_error(error_from_response(400, {"code": "InvalidGroupName"}))
    assert not is_per_handle_error(error_from_response(503, {"code": "Busy"}))


def simple(service: FakeGroupService, **options) -> SimpleConsumer:
    transport = Transport(
        "http://fake",
        service.credentials,
        retry=RetryPolicy(max_attempts=1),
        http_transport=service.transport(),
    )
    return SimpleConsumer("http://fake", None, "g", ["t"], 0, transport=transport, **options)


@pytest.mark.parametrize("legacy_acks", [False, True], ids=["results", "legacy"])
def test_simple_consumer_acks(legacy_acks):
    service = FakeGroupService()
    service.legacy_acks = legacy_acks
    service.add("h1", "stale-1", "h2", "bad-1")
    with simple(service) as c:
        messages = c.receive(10)
        results = c.ack_batch(messages)
        assert [(r.receipt_handle, r.status) for r in results] == [
            ("h1", AckStatus.ACKED),
            ("stale-1", AckStatus.EXPIRED),
            ("h2", AckStatus.ACKED),
            ("bad-1", AckStatus.INVALID),
        ]
        assert [r.message_id for r in results] == [m.message_id for m in messages]
        assert c.ack(messages[0]).acked  # acking twice is fine
        with pytest.raises(ReceiptHandleExpiredError) as stale:
            c.ack(messages[1])
        assert stale.value.receipt_handles == ["stale-1"]
        with pytest.raises(BadRequestError, match="InvalidReceiptHandle"):
            c.ack("bad-2")
    assert sorted(set(service.acked)) == ["h1", "h2"]


def test_unreachable_acks_are_pending_with_an_outbox(tmp_path):
    service = FakeGroupService()
    service.add("h1")
    with simple(service, outbox_path=tmp_path / "acks.db") as c:
        (message,) = c.receive(1)
        service.down = True
        (result,) = c.ack_batch([message])
        assert result.status is AckStatus.PENDING and not result.final
        assert c.ack(message).status is AckStatus.PENDING  # kept, no error
        service.down = False


@pytest.mark.parametrize("legacy_acks", [False, True], ids=["results", "legacy"])
def test_the_retrier_settles_expired_and_invalid_acks_for_good(legacy_acks):
    service = FakeGroupService()
    service.legacy_acks = legacy_acks
    store = MemoryPendingAcks()
    transport = Transport("http://fake", service.credentials, http_transport=service.transport())
    retrier = AckRetrier(store, transport, interval_s=3600)
    far = 10**13
    retrier.park("g", [(h, far) for h in ("h1", "stale-1", "bad-1", "foreign-1", "h2")])
    retrier.flush_once()
    assert retrier.pending() == 0  # acked, expired, invalid: all done
    assert sorted(set(service.acked)) == ["h1", "h2"]
    retrier.close()


@pytest.mark.parametrize("legacy_acks", [False, True], ids=["on-receive", "service-without"])
def test_receive_and_ack_gives_the_results_ack_batch_gives(legacy_acks):
    service = FakeGroupService()
    service.legacy_acks = legacy_acks
    service.add("h1", "stale-1", "h2", "bad-1")
    with simple(service) as c:
        messages = c.receive(10)
        service.add("h3")
        results, received = c.receive_and_ack([*messages, messages[0]], 10)
        assert [(r.receipt_handle, r.status) for r in results] == [
            ("h1", AckStatus.ACKED),
            ("stale-1", AckStatus.EXPIRED),
            ("h2", AckStatus.ACKED),
            ("bad-1", AckStatus.INVALID),
            ("h1", AckStatus.ACKED),
        ]
        assert [r.message_id for r in results] == [m.message_id for m in [*messages, messages[0]]]
        assert [m.receipt_handle for m in received] == ["h3"]
    assert sorted(set(service.acked)) == ["h1", "h2"]
    if legacy_acks:  # refused once, then acked on their own
        assert service.riding_acks == [] and service.ack_requests >= 1
    else:
        assert service.riding_acks == ["h1", "stale-1", "h2", "bad-1"]
        assert service.ack_requests == 0


def test_acks_of_a_failed_receive_and_ack_are_kept_like_standalone_ones(tmp_path):
    service = FakeGroupService()
    service.add("h1")
    with simple(service, outbox_path=tmp_path / "acks.db") as c:
        messages = c.receive(1)
        service.fail_receives = 1
        with pytest.raises(MQError):
            c.receive_and_ack(messages, 1)
        assert service.acked == ["h1"]  # sent on their own before the error was raised
        service.down = True
        with pytest.raises(MQError):
            c.receive_and_ack(messages, 1)
        assert c.pending_acks == 1  # unreachable: kept in the outbox, as ack_batch keeps it
        service.down = False


def test_a_receive_refused_for_its_own_mistake_does_not_stop_acks_riding():
    service = FakeGroupService()
    service.add("h1", "h2")
    with simple(service) as c:
        first = c.receive(1)
        with pytest.raises(BadRequestError):
            c.receive_and_ack(first, 5000)  # the receive's mistake, not the service's age
        assert service.acked == ["h1"]  # acked on their own before the error was raised
        assert c.acks_ride
        second = c.receive(1)
        results, _ = c.receive_and_ack(second, 1)
        assert [r.status for r in results] == [AckStatus.ACKED]
        assert service.riding_acks == ["h2"]


def test_acks_spanning_more_queues_than_one_request_takes_are_all_acked():
    service = FakeGroupService()
    handles = [f"q{n}-m" for n in range(250)]  # 250 queues: over the 100 one ack may span
    service.add(*handles)
    with simple(service) as c:
        messages = c.receive(1000)
        results = c.ack_batch(messages)
    assert [r.status for r in results] == [AckStatus.ACKED] * 250
    assert sorted(service.acked) == sorted(handles)


def test_riding_acks_spanning_more_queues_are_all_acked_and_acks_still_ride():
    service = FakeGroupService()
    handles = [f"q{n}-m" for n in range(250)]
    service.add(*handles, "h-next")
    with simple(service) as c:
        messages = c.receive(250)
        results, received = c.receive_and_ack(messages, 10)
        assert [r.status for r in results] == [AckStatus.ACKED] * 250
        assert [m.receipt_handle for m in received] == ["h-next"]
        assert c.acks_ride  # the acks' own mistake: not a service refusing acks on receives
    assert sorted(service.acked) == sorted(handles)


def test_the_retrier_acks_pending_acks_spanning_more_queues_than_one_request_takes():
    service = FakeGroupService()
    store = MemoryPendingAcks()
    transport = Transport("http://fake", service.credentials, http_transport=service.transport())
    retrier = AckRetrier(store, transport, interval_s=3600)
    handles = [f"q{n}-m" for n in range(250)]
    retrier.park("g", [(h, 10**13) for h in handles])
    retrier.flush_once()
    assert retrier.pending() == 0
    assert sorted(service.acked) == sorted(handles)  # acked, not dropped as refused
    retrier.close()


def test_the_async_consumer_keeps_acks_riding_after_a_receive_refused_for_its_own_mistake():
    service = FakeGroupService()
    service.add("h1", "h2", *[f"q{n}-m" for n in range(150)])

    async def scenario() -> None:
        transport = AsyncTransport(
            "http://fake",
            service.credentials,
            retry=RetryPolicy(max_attempts=1),
            http_transport=httpx.MockTransport(service.handle),
        )
        c = AsyncSimpleConsumer("http://fake", None, "g", ["t"], 0, transport=transport)
        try:
            first = await c.receive(1)
            with pytest.raises(BadRequestError):
                await c.receive_and_ack(first, 5000)  # the receive's own mistake
            wide = await c.receive(151)  # h2 and 150 queues: more than one ack may span
            results, _ = await c.receive_and_ack(wide, 1)
            assert [r.status for r in results] == [AckStatus.ACKED] * 151
            assert c.acks_ride
        finally:
            await c.close()
            await transport.close()

    asyncio.run(scenario())
    assert len(set(service.acked)) == 152
