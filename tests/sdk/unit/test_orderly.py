"""The orderly push consumer's pieces, without a service: per-queue serial batches, and one
queue's batch stopping at the first failure."""

from __future__ import annotations

import base64
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cirrusmq import ConsumeResult, MessageView
from cirrusmq.consumer.orderly import GroupSerializer, by_queue, run_orderly_batch


def view(queue: int, offset: int, topic: str = "t", handle: str | None = None) -> MessageView:
    return MessageView(
        message_id=f"{queue}-{offset}",
        topic=topic,
        body=b"x",
        tag=None,
        keys=(),
        properties={},
        message_group=None,
        queue=queue,
        offset=offset,
        born_timestamp=0,
        stored_timestamp=0,
        receipt_handle=handle or f"h{queue}-{offset}",
    )


def test_batches_of_one_queue_never_overlap_and_queues_run_in_parallel():
    running: dict[int, int] = {}
    overlap, parallel = [], []
    lock = threading.Lock()

    def run(batch):
        queue = batch[0].queue
        with lock:
            running[queue] = running.get(queue, 0) + 1
            overlap.append(running[queue] > 1)
            parallel.append(sum(1 for n in running.values() if n))
        time.sleep(0.01)
        with lock:
            running[queue] -= 1

    with ThreadPoolExecutor(8) as pool:
        serializer = GroupSerializer(pool.submit, run)
        for offset in range(10):
            for queue in range(4):
                serializer.submit([("t", queue)], [view(queue, offset)])
    assert not any(overlap) and max(parallel) > 1
    assert serializer.busy() == 0


def test_by_queue_keeps_offset_order_per_queue():
    grouped = by_queue([view(1, 5), view(0, 2), view(1, 3), view(0, 1)])
    assert {k: [m.offset for m in v] for k, v in grouped.items()} == {
        ("t", 1): [3, 5],
        ("t", 0): [1, 2],
    }


def test_a_failure_acks_the_successes_suspends_and_retries_from_the_failed_message():
    calls: list[tuple] = []
    batch = [view(0, o) for o in range(5)]

    def listener(message):
        calls.append(("listen", message.offset))
        if message.offset == 2:
            raise RuntimeError("boom")
        return ConsumeResult.SUCCESS

    done = run_orderly_batch(
        batch,
        listener=listener,
        ack=lambda ms: calls.append(("ack", [m.offset for m in ms])),
        retry_now=lambda m: calls.append(("retry", m.offset)),
        suspend=lambda s: calls.append(("suspend", s)),
        suspend_s=1.5,
        stopped=lambda: False,
    )
    assert done == 2
    assert calls == [
        ("listen", 0),
        ("listen", 1),
        ("listen", 2),
        ("ack", [0, 1]),
        ("suspend", 1.5),
        ("retry", 2),
    ]


def test_a_whole_success_is_one_ack_and_a_stop_leaves_the_rest_unacked():
    acks: list[list[int]] = []
    stop_after = iter([False, False, True])
    done = run_orderly_batch(
        [view(0, o) for o in range(3)],
        listener=lambda m: ConsumeResult.SUCCESS,
        ack=lambda ms: acks.append([m.offset for m in ms]),
        retry_now=lambda m: None,
        suspend=lambda s: None,
        suspend_s=0,
        stopped=lambda: next(stop_after),
    )
    assert (done, acks) == (2, [[0, 1]])


def test_a_batch_waits_only_for_earlier_batches_sharing_a_message_group():
    started: list[str] = []
    gates = {name: threading.Event() for name in ("a", "b", "ab", "b2", "c")}

    def run(name: str) -> None:
        started.append(name)
        assert gates[name].wait(30)

    with ThreadPoolExecutor(8) as pool:
        serializer = GroupSerializer(pool.submit, run)
        serializer.submit(["a"], "a")
        serializer.submit(["b"], "b")
        serializer.submit(["a", "b"], "ab")  # a delivery holding both groups
        serializer.submit(["b"], "b2")  # its redelivery's tail: behind it, never beside it
        serializer.submit(["c"], "c")
        gates["c"].set()
        while serializer.busy() > 4:  # c ran although a and b block
            time.sleep(0.001)
        assert sorted(started) == ["a", "b", "c"] and serializer.waiting() == 2
        gates["a"].set()
        while serializer.busy() > 3:
            time.sleep(0.001)
        assert "ab" not in started  # b still runs
        gates["b"].set()
        gates["ab"].set()
        gates["b2"].set()
    assert started[-2:] == ["ab", "b2"] and serializer.busy() == 0


def _handle(topic: str, queue: int, offset: int, lease_id: str) -> str:
    """A receipt handle as the service makes it: base64url JSON of (group, topic, queue,
    offset, lease id, attempt, invisible until), a dot, its signature."""
    payload = json.dumps(["g", topic, queue, offset, lease_id, 1, 0], separators=(",", ":"))
    encoded = base64.urlsafe_b64encode(payload.encode()).rstrip(b"=").decode()
    return f"{encoded}.c2lnbmF0dXJl"


def test_a_redriven_letter_is_a_batch_of_its_own_beside_its_queue_s_delivery():
    """A redriven FIFO dead letter is shown at its first place (topic f, queue 0) but is
    leased in the group's retry topic: a batch is one delivery (one lease), so a failure
    of the letter (its change of invisible time to 0 reaches its own lease only) never
    leaves the queue's own messages, fetched in the same receive, leased and unrun until
    their invisible time ends (then redelivered with ``delivery_attempt`` + 1)."""
    letter = view(0, 1, topic="f", handle=_handle("retry.g.f", 16, 0, "r"))
    own = [view(0, o, topic="f", handle=_handle("f", 0, o, "l")) for o in (7, 8)]
    batches = sorted(
        ([m.offset for m in b] for b in by_queue([own[0], letter, own[1]]).values()), key=len
    )
    assert batches == [[1], [7, 8]]
