"""The soak's pipeline: orders through two exactly-once stages, under faults, counted end to
end.

A source producer sends unique orders to ``s0`` (NORMAL); stage 1 (2 workers) reads ``s0``
and, in exactly-once steps, acks each order and writes an enriched copy to ``s1`` (NORMAL);
stage 2 (2 workers) reads ``s1`` and writes to ``s2`` (FIFO, grouped by the order's group);
a sink consumer reads ``s2`` and acks. Each copy carries the order id (property ``order``)
and the message id it was made from (``from``).

Faults: a worker dies before or after a commit (it restarts with the same transactional id,
fencing what it left), the answer of a commit is lost (the worker commits the same step
again), a worker holds a step past its lease (the step is refused, the orders come back to
either worker), a newer instance fences a worker mid-step; on a local stack the broker's
step service also crashes before or after its transaction and throttles.

The ledger reads every stored message of ``s1`` and ``s2`` at the end: an input with two
stored copies is duplicated, a sent order with no copy in ``s2`` (or never acked by the
sink) is lost. ``broken`` runs a stage that acks, then sends, as two calls (or sends, then
acks), to show that the ledger sees what a non-atomic stage does under the same crashes.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from cirrusmq import (
    AckStatus,
    Admin,
    ExactlyOnceProducer,
    LeaseMovedOnError,
    Message,
    MQError,
    Producer,
    ProducerFencedError,
    PullConsumer,
    SimpleConsumer,
)
from cirrusmq.errors import TransportError
from cirrusmq.transport import RetryPolicy, Transport
from soak_ledger import Verdict
from soak_run import Run, wait_for_room

INVISIBLE_S = 60
RECEIVE_MAX = 16
AWAIT_S = 2
WORKERS = 2
SOURCE_BATCH = 50
MAX_ATTEMPTS = 1000
"""Redeliveries are the faults' business: no order may end a dead letter."""
COMMIT_TRIES = 4
GROUPS = 5
"""Order groups: the FIFO output's message groups."""

CRASH_BEFORE, CRASH_AFTER, SLOW, FENCED, SPLIT = 0.04, 0.04, 0.03, 0.02, 0.3
"""Shares of a worker's batches: it dies before its commit, dies after it, holds it past
the lease, is fenced by a newer instance mid-step; steps of one order each (else one step
per receive)."""
LOST_ANSWER = 0.05
"""Share of commits whose answer the worker never gets (the commit took effect)."""
BROKER_CRASH_BEFORE, BROKER_CRASH_AFTER, BROKER_THROTTLE = 0.03, 0.03, 0.03
"""Shares of the broker's step commits that die before, die after their transaction, or
are throttled (a local stack only: its handlers run in this process)."""


class WorkerCrash(Exception):
    """The worker process dies here (its consumer and producer go with it)."""


class BrokerCrash(BaseException):
    """The Lambda running a step dies here: the gateway answers 5xx."""


class LosingTransport(Transport):
    """A transport that loses the answer of some step commits after they took effect."""

    def __init__(self, *args: Any, rng: random.Random, counters: PipelineLedger, **kw: Any):
        super().__init__(*args, **kw)
        self._rng, self._ledger = rng, counters

    def request(self, method: str, path: str, **kw: Any) -> Any:
        body = super().request(method, path, **kw)
        if path.endswith("/steps") and self._rng.random() < LOST_ANSWER:
            self._ledger.count("answers lost")
            raise TransportError("the answer was lost")
        return body


class PipelineLedger:
    """What the pipeline sent, what the sink acked, and (at the end) every stored copy."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[str, str] = {}
        """Order id → its message id in s0."""
        self.uncertain: set[str] = set()
        self.sink_acked: set[str] = set()
        """Order ids whose s2 copy the sink acked."""
        self.stored: dict[str, list[tuple[str, str, str]]] = {"s0": [], "s1": [], "s2": []}
        """Topic key → (message id, order id, made from) of every stored message."""
        self.dead = 0
        self.counters: Counter[str] = Counter()
        self.last_delivery_ms = 0

    def record_sent(self, order: str, message_id: str) -> None:
        with self.lock:
            self.sent[order] = message_id

    def delivered(self, at_ms: int) -> None:
        with self.lock:
            self.last_delivery_ms = max(self.last_delivery_ms, at_ms)

    def record_sink(self, order: str) -> None:
        with self.lock:
            self.sink_acked.add(order)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counters[what] += n

    def backlog(self) -> int:
        return len(self.sent) - len(self.sink_acked)

    def judge(self) -> PipelineVerdict:
        verdict = PipelineVerdict()
        examples: dict[str, list[str]] = {}
        copies = {key: Counter(src for _, _, src in rows) for key, rows in self.stored.items()}
        orders = {key: Counter(order for _, order, _ in rows) for key, rows in self.stored.items()}
        verdict.sent = len(self.sent)
        verdict.stage1 = len(orders["s1"])
        verdict.stage2 = len(orders["s2"])
        verdict.acked = len(self.sink_acked)
        verdict.dead = self.dead
        for key in ("s1", "s2"):
            for source, n in sorted(copies[key].items()):
                if n > 1:
                    verdict.duplicate += n - 1
                    examples.setdefault("pipeline duplicated", []).append(
                        f"{key} from {source} x{n}"
                    )
        for order, n in sorted(orders["s0"].items()):
            if n > 1:
                verdict.duplicate += n - 1
                examples.setdefault("pipeline duplicated", []).append(f"s0 {order} x{n}")
        for order in sorted(self.sent):
            if not orders["s2"][order] or order not in self.sink_acked:
                verdict.lost += 1
                where = next((k for k in ("s0", "s1", "s2") if not orders[k][order]), "")
                text = f"{order} (none in {where})" if where else f"{order} (not acked by the sink)"
                examples.setdefault("pipeline lost", []).append(text)
        known = set(self.sent) | self.uncertain
        for key in ("s1", "s2"):
            for _, order, _ in self.stored[key]:
                if order not in known:
                    verdict.unsent += 1
                    examples.setdefault("pipeline never sent", []).append(f"{key} {order}")
        verdict.examples = examples
        return verdict


class PipelineVerdict(Verdict):
    stage1: int = 0
    stage2: int = 0

    def line(self) -> str:
        return (
            f"sent {self.sent}, stage1 {self.stage1}, stage2 {self.stage2}, sink {self.acked}, "
            f"lost {self.lost}, duplicated {self.duplicate}, dead-lettered {self.dead}"
        )


class PipelineDriver:
    """Topics ``s0`` → stage 1 → ``s1`` → stage 2 → ``s2`` (FIFO) → sink."""

    protocol = "pipeline"
    quiet_ms = (2 * INVISIBLE_S + 30) * 1000
    """Drained once this long passed without a delivery: the longest lease and a margin."""

    def __init__(self, run: Run, *, broken: str | None = None, seed: int = 7) -> None:
        self.run = run
        self.broken = broken
        """``"ack-then-send"`` or ``"send-then-ack"``: stage 1 without a step."""
        self.seed = seed
        prefix = f"soak-{run.run_id}-p"
        self.prefix = prefix
        self.topics = {k: f"{prefix}-{k}" for k in ("s0", "s1", "s2")}
        self.groups = {k: f"{prefix}-{k}g" for k in ("s0", "s1", "s2")}
        """The group reading each topic: stage 1, stage 2, the sink."""
        self.ledger = PipelineLedger()
        self._unpatch: Callable[[], None] | None = None
        self.broken_steps = 0

    # -------------------------------------------------------------- setup
    def setup(self) -> None:
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            admin.create_topic(self.topics["s0"], queues=4)
            admin.create_topic(self.topics["s1"], queues=4)
            admin.create_topic(self.topics["s2"], queues=4, message_type="FIFO")
            for group in self.groups.values():
                admin.update_group(group, max_delivery_attempts=MAX_ATTEMPTS)
        for key, group in self.groups.items():  # subscribed before anything is sent
            with SimpleConsumer(
                self.run.endpoint, self.run.credentials, group, [self.topics[key]], await_duration=0
            ) as consumer:
                consumer.receive(1, INVISIBLE_S)
        if self.run.local is not None:
            self._unpatch = broker_faults(random.Random(self.seed), self.ledger)

    def producers(self) -> list[Callable[[], None]]:
        return [self.source]

    def consumers(self) -> list[Callable[[], None]]:
        stages = [
            partial(self.stage, stage, worker) for stage in (1, 2) for worker in range(WORKERS)
        ]
        return [*stages, self.sink]

    # -------------------------------------------------------------- source and sink
    def source(self) -> None:
        run, ledger = self.run, self.ledger
        with Producer(run.endpoint, run.credentials, linger_ms=5) as producer:
            k = 0
            while wait_for_room(run, ledger):
                count = run.take(SOURCE_BATCH)
                if not count:
                    break
                sends = []
                for _ in range(count):
                    k += 1
                    order = f"o{k}"
                    message = Message(
                        self.topics["s0"], order.encode(), properties={"order": order}
                    )
                    sends.append((order, producer.send_async(message)))
                for order, future in sends:
                    try:
                        ledger.record_sent(order, future.result().message_id)
                    except MQError as exc:
                        ledger.count(f"send: {type(exc).__name__}")
                        ledger.uncertain.add(order)

    def sink(self) -> None:
        run, ledger = self.run, self.ledger
        with SimpleConsumer(
            run.endpoint,
            run.credentials,
            self.groups["s2"],
            [self.topics["s2"]],
            await_duration=AWAIT_S,
        ) as consumer:
            while not run.stop_all.is_set():
                try:
                    got = consumer.receive(RECEIVE_MAX, INVISIBLE_S)
                    if got:
                        ledger.delivered(run.now_ms())
                        results = consumer.ack_batch(got)
                except MQError as exc:
                    ledger.count(f"sink: {type(exc).__name__}")
                    time.sleep(0.2)
                    continue
                for view, result in zip(got, results if got else [], strict=True):
                    if result.status is AckStatus.ACKED:
                        ledger.record_sink(view.properties["order"])
                    else:
                        ledger.count(f"sink ack {result.status.value}")

    # -------------------------------------------------------------- stages
    def stage(self, stage: int, worker: int) -> None:
        """One worker of ``stage``: restarted (same transactional id) after each crash."""
        rng = random.Random(self.seed * 100 + stage * 10 + worker)
        while not self.run.stop_all.is_set():
            try:
                self.work(stage, worker, rng)
            except WorkerCrash:
                self.ledger.count("worker crashes")
            except MQError as exc:
                self.ledger.count(f"stage {stage}: {type(exc).__name__}")
                time.sleep(0.2)

    def work(self, stage: int, worker: int, rng: random.Random) -> None:
        run, ledger = self.run, self.ledger
        source, target = self.topics[f"s{stage - 1}"], self.topics[f"s{stage}"]
        group = self.groups[f"s{stage - 1}"]
        txid = f"{self.prefix}-stage{stage}-w{worker}"
        with (
            self.producer(stage, txid, rng) as producer,
            SimpleConsumer(
                run.endpoint, run.credentials, group, [source], await_duration=AWAIT_S
            ) as consumer,
            Producer(run.endpoint, run.credentials) if self.broken else nullcontext() as plain,
        ):
            while not run.stop_all.is_set():
                got = consumer.receive(RECEIVE_MAX, INVISIBLE_S)
                if not got:
                    continue
                ledger.delivered(run.now_ms())
                ledger.count(f"stage {stage} received", len(got))
                outputs = [(view, self.derived(stage, target, view)) for view in got]
                if self.broken and stage == 1:
                    self.broken_step(consumer, plain, outputs, rng)
                    continue
                roll = rng.random()
                if roll < CRASH_BEFORE:
                    raise WorkerCrash()
                if roll < CRASH_BEFORE + SLOW:
                    self.outlive(got)
                elif roll < CRASH_BEFORE + SLOW + FENCED:
                    ledger.count("fenced by a newer instance")
                    self.producer(stage, txid, rng).close()
                steps = [[o] for o in outputs] if rng.random() < SPLIT else [outputs]
                for part in steps:
                    if not self.commit(producer, consumer, part):
                        break
                if producer.fenced:
                    return  # a newer instance took over: this one starts again
                if rng.random() < CRASH_AFTER:
                    raise WorkerCrash()

    def producer(self, stage: int, txid: str, rng: random.Random) -> ExactlyOnceProducer:
        run = self.run
        transport = LosingTransport(
            run.endpoint,
            run.credentials,
            request_timeout_s=30.0,
            retry=RetryPolicy(max_attempts=3),
            rng=rng,
            counters=self.ledger,
        )
        return _Owning(
            ExactlyOnceProducer(
                run.endpoint,
                run.credentials,
                producer_group=f"{self.prefix}-pg{stage}",
                transactional_id=txid,
                transport=transport,
            ),
            transport,
        )

    def derived(self, stage: int, target: str, view: Any) -> Message:
        order = view.properties["order"]
        properties = {"order": order, "from": view.message_id}
        body = view.body + f" stage{stage}".encode()
        if stage == 2:  # the FIFO output: in order per order group
            group = f"g{int(order[1:]) % GROUPS}"
            return Message(target, body, properties=properties, message_group=group)
        return Message(target, body, properties=properties)

    def commit(self, producer: Any, consumer: SimpleConsumer, outputs: list) -> bool:
        """Commit one step (again after a lost answer); False once it is refused."""
        ledger = self.ledger
        step = producer.exactly_once(consumer)
        for view, message in outputs:
            step.send(message)
            step.ack(view)
        for _ in range(COMMIT_TRIES):
            try:
                result = step.commit()
            except LeaseMovedOnError:
                ledger.count("lease moved on")
                return False
            except ProducerFencedError:
                ledger.count("producer fenced")
                return False
            except MQError as exc:
                ledger.count(f"commit: {type(exc).__name__}")
                continue
            ledger.count("steps")
            ledger.count("retried commits answered duplicate", result.duplicate)
            return True
        raise WorkerCrash()  # gave up: the orders come back when their leases end

    def outlive(self, got: list) -> None:
        """Hold the step until its lease ended (the broker's clock moves on)."""
        self.ledger.count("held past the lease")
        deadline = max(v.invisible_until or 0 for v in got)
        while self.run.now_ms() <= deadline and not self.run.stop_all.is_set():
            time.sleep(0.2)

    def broken_step(self, consumer: SimpleConsumer, plain: Producer, outputs: list, rng) -> None:
        """Ack, then send (or the other way round) as two calls; the worker may die between."""
        views = [v for v, _ in outputs]
        first_ack = self.broken == "ack-then-send"
        if first_ack:
            consumer.ack_batch(views)
        else:
            plain.send_batch([m for _, m in outputs])
        self.broken_steps += 1
        if self.broken_steps % 2:  # every other one, the first included
            raise WorkerCrash()
        if first_ack:
            plain.send_batch([m for _, m in outputs])
        else:
            consumer.ack_batch(views)

    # -------------------------------------------------------------- end
    def settled(self) -> bool:
        """Quiet is enough: an order not through yet comes again once its lease ends."""
        return True

    def collect_dead(self) -> None:
        if self._unpatch is not None:
            self._unpatch()
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            for group in self.groups.values():
                self.ledger.dead += len(admin.list_dead_letters(group, limit=100).dead_letters)
        with tempfile.TemporaryDirectory() as scratch:
            for key, topic in self.topics.items():
                self.ledger.stored[key] = self.read_all(topic, Path(scratch) / f"{key}.db")

    def read_all(self, topic: str, store: Path) -> list[tuple[str, str, str]]:
        """Every message stored in ``topic``: (message id, order, made from)."""
        run = self.run
        rows = []
        with PullConsumer(
            run.endpoint,
            run.credentials,
            f"{self.prefix}-audit",
            offset_store_path=store,
            consume_from="earliest",
            max_poll_messages=100,
        ) as reader:
            reader.assign(topic)
            reader.seek_to_beginning()
            with Admin(run.endpoint, run.credentials) as admin:
                ends = {q.queue: q.max_offset for q in admin.topic_offsets(topic)}
            for _ in range(10_000):
                if all(reader.position(q) >= end for q, end in ends.items()):
                    break
                for view in reader.poll(0):
                    props = view.properties
                    rows.append((view.message_id, props.get("order", ""), props.get("from", "")))
        return rows


class _Owning:
    """An exactly-once producer that closes the transport it was given."""

    def __init__(self, producer: ExactlyOnceProducer, transport: Transport) -> None:
        self.producer, self.transport = producer, transport

    def __getattr__(self, name: str) -> Any:
        return getattr(self.producer, name)

    def close(self) -> None:
        self.producer.close()
        self.transport.close()

    def __enter__(self) -> Any:
        return self.producer

    def __exit__(self, *_: Any) -> None:
        self.close()


def broker_faults(rng: random.Random, ledger: PipelineLedger) -> Callable[[], None]:
    """Make the broker's step service crash before or after its transaction, or throttle
    (the local stack's handlers run in this process); returns the undo."""
    from cirrusmq_broker.errors import Throttled
    from cirrusmq_broker.services.consume_produce.service import ConsumeProduceSteps

    commit = ConsumeProduceSteps.commit
    lock = threading.Lock()

    def faulty(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            roll = rng.random()
        if roll < BROKER_THROTTLE:
            ledger.count("broker throttled")
            raise Throttled("soak: throttled")
        if roll < BROKER_THROTTLE + BROKER_CRASH_BEFORE:
            ledger.count("broker crashed before its transaction")
            raise BrokerCrash()
        result = commit(self, *args, **kwargs)
        if roll < BROKER_THROTTLE + BROKER_CRASH_BEFORE + BROKER_CRASH_AFTER:
            ledger.count("broker crashed after its transaction")
            raise BrokerCrash()
        return result

    ConsumeProduceSteps.commit = faulty  # type: ignore[method-assign]

    def undo() -> None:
        ConsumeProduceSteps.commit = commit  # type: ignore[method-assign]

    return undo
