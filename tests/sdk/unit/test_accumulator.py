"""When a topic's open batch is sealed."""

from __future__ import annotations

from cirrusmq.producer.accumulator import REQUEST_OVERHEAD_BYTES, Accumulator, PendingMessage


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def pending(i: int, size: int = 10) -> PendingMessage:
    return PendingMessage(f"m{i}", {"i": i}, size)


def make(clock: Clock, **options) -> Accumulator:
    defaults = {"linger_ms": 5, "max_batch_messages": 3, "max_batch_bytes": 10_000}
    return Accumulator(clock=clock, **{**defaults, **options})


def test_a_batch_lingers_then_is_due():
    clock = Clock()
    acc = make(clock)
    assert acc.add("a", pending(1)) is True  # a new batch: the sender should look
    assert acc.add("a", pending(2)) is False
    assert acc.due(busy_topics=set()) == []
    assert acc.next_deadline(busy_topics=set()) == clock.now + 0.005
    clock.now += 0.006
    (batch,) = acc.due(busy_topics=set())
    assert [m.message_id for m in batch.messages] == ["m1", "m2"] and len(acc) == 0


def test_full_batches_are_due_at_once_even_for_busy_topics():
    acc = make(Clock())
    for i in range(7):
        acc.add("a", pending(i))
    sealed = acc.due(busy_topics={"a"})
    assert [len(b.messages) for b in sealed] == [3, 3]
    assert len(acc) == 1


def test_byte_bound_starts_a_new_batch():
    acc = make(Clock(), max_batch_bytes=REQUEST_OVERHEAD_BYTES + 25, max_batch_messages=100)
    for i in range(3):
        acc.add("a", pending(i, size=10))
    sealed = acc.due(busy_topics={"a"})
    assert [len(b.messages) for b in sealed] == [2]


def test_busy_topics_keep_growing_until_idle_and_urgent_skips_linger():
    clock = Clock()
    acc = make(clock, max_batch_messages=100)
    acc.add("a", pending(1))
    clock.now += 1
    assert acc.due(busy_topics={"a"}) == []  # a request of "a" is in flight
    assert acc.next_deadline(busy_topics={"a"}) is None
    acc.add("b", pending(2), urgent=True)
    assert [b.topic for b in acc.due(busy_topics={"a"})] == ["b"]
    assert [b.topic for b in acc.due(busy_topics=set())] == ["a"]


def test_everything_seals_all_batches():
    acc = make(Clock())
    acc.add("a", pending(1))
    acc.add("b", pending(2))
    assert {b.topic for b in acc.due(busy_topics={"a", "b"}, everything=True)} == {"a", "b"}
