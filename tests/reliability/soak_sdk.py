"""The soak's CirrusMQ SDK side: batched producers (normal, delayed and FIFO messages), a
``TransactionProducer`` (commits and rollbacks, checks answered), and consumers in two groups
whose acks ride on their next receive (nacks, messages left to expire, late acks of expired
handles, ``change_invisible_duration``)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

from cirrusmq import (
    AckStatus,
    Admin,
    Message,
    MQError,
    Producer,
    SimpleConsumer,
    TransactionProducer,
    TransactionResolution,
)
from soak_ledger import Delivery, Ledger
from soak_run import Run, is_poison, poison, wait_for_room

INVISIBLE_S = 60
MAX_ATTEMPTS = 3
PRODUCER_BATCH = 100
"""Messages one producer hands over at once (one request per topic)."""
RECEIVE_MAX = 100
NACK_BATCH, NACK_AFTER_S = 10, 2.0
"""Nacks are sent once this many wait, or the first waited this long."""
AWAIT_S = 3
ACK_TRIES = 5


class SdkDriver:
    """Topics ``n`` (NORMAL), ``f`` (FIFO), ``x`` (TRANSACTION); group ``a`` consumes all
    three, group ``b`` only ``n``."""

    protocol = "sdk"
    quiet_ms = (2 * INVISIBLE_S + 30 + 30) * 1000
    """Drained once this long passed without a delivery: the longest lease, the backoff
    before a last attempt (30 s, also the longest delay) and a margin."""

    def __init__(self, run: Run, producers: int = 3) -> None:
        self.run = run
        prefix = f"soak-{run.run_id}"
        self.topics = {"n": f"{prefix}-n", "f": f"{prefix}-f", "x": f"{prefix}-x"}
        self.group_a, self.group_b = f"{prefix}-a", f"{prefix}-b"
        self.ledger = Ledger(
            self.protocol,
            {self.group_a: frozenset("nfx"), self.group_b: frozenset("n")},
        )
        self.plan = [
            (self.group_a, "n"),
            (self.group_b, "n"),
            (self.group_a, "nfx"),
            (self.group_b, "n"),
        ]
        """The consumers: (group, the keys of the topics it subscribes to) each."""
        self.producer_count = producers
        self.decided: dict[str, TransactionResolution] = {}

    # -------------------------------------------------------------- setup
    def setup(self) -> None:
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            admin.create_topic(self.topics["n"], queues=8)
            admin.create_topic(self.topics["f"], queues=4, message_type="FIFO")
            admin.create_topic(self.topics["x"], queues=4, message_type="TRANSACTION")
            for group in self.ledger.groups:
                admin.update_group(group, max_delivery_attempts=MAX_ATTEMPTS)
        for group, keys in self.plan:  # subscribed before anything is sent
            with SimpleConsumer(
                self.run.endpoint, self.run.credentials, group, self.names(keys), await_duration=0
            ) as consumer:
                consumer.receive(1, INVISIBLE_S)

    def names(self, keys: str) -> list[str]:
        return [self.topics[k] for k in keys]

    def producers(self) -> list[Callable[[], None]]:
        return [partial(self.produce, i) for i in range(self.producer_count)] + [self.transact]

    def consumers(self) -> list[Callable[[], None]]:
        return [partial(self.consume, i, group, keys) for i, (group, keys) in enumerate(self.plan)]

    # -------------------------------------------------------------- producers
    def produce(self, index: int) -> None:
        rng = random.Random(index)
        ledger, run = self.ledger, self.run
        with Producer(run.endpoint, run.credentials, linger_ms=5) as producer:
            k = 0
            while wait_for_room(run, ledger):
                count = run.take(PRODUCER_BATCH)
                if not count:
                    break
                sends: list[tuple[str, str, Future]] = []
                for _ in range(count):
                    k += 1
                    body = f"sdk{index}-{k}" + poison(rng)
                    roll = rng.random()
                    if roll < 0.15:
                        message = Message(
                            self.topics["f"], body.encode(), message_group=f"g{k % 7}"
                        )
                    elif roll < 0.35:
                        level = rng.choice((2, 3, 4))  # 5 s, 10 s, 30 s
                        message = Message(self.topics["n"], body.encode(), delay_level=level)
                    else:
                        message = Message(self.topics["n"], body.encode(), tag="soak")
                    key = "f" if message.topic == self.topics["f"] else "n"
                    sends.append((body, key, producer.send_async(message)))
                for body, key, future in sends:
                    try:
                        receipt = future.result()
                    except MQError as exc:
                        ledger.count(f"send: {type(exc).__name__}")
                        ledger.record_uncertain(body)
                        continue
                    ledger.record_sent(receipt.message_id, key, receipt.delivery_timestamp or 0)

    def transact(self) -> None:
        rng = random.Random(99)
        ledger, run = self.ledger, self.run

        def checker(view: object) -> TransactionResolution:
            transaction_id = getattr(view, "transaction_id", "")
            return self.decided.get(transaction_id, TransactionResolution.UNKNOWN)

        with TransactionProducer(
            run.endpoint, run.credentials, producer_group=f"soak-{run.run_id}-pg", checker=checker
        ) as producer:
            while run.pause(0):  # a few messages: not held back by the backlog
                count = run.take(rng.randint(1, 3))
                if not count:
                    break
                txn = producer.begin_transaction()
                bodies = [f"sdkt-{txn.id}-{i}" for i in range(count)]
                try:
                    receipts = txn.send_batch(
                        [Message(self.topics["x"], b.encode()) for b in bodies]
                    )
                    commit = rng.random() < 0.8
                    resolution = (
                        TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK
                    )
                    self.decided[txn.id] = resolution
                    if commit:
                        txn.commit()
                    else:
                        txn.rollback()
                except MQError as exc:
                    ledger.count(f"transaction: {type(exc).__name__}")
                    ledger.record_uncertain(*bodies)
                    continue
                for receipt, body in zip(receipts, bodies, strict=True):
                    if commit:
                        ledger.record_sent(receipt.message_id, "x")
                    else:
                        ledger.record_rolled_back(receipt.message_id, body)
                ledger.count("transactions")

    # -------------------------------------------------------------- consumers
    def consume(self, index: int, group: str, keys: str) -> None:
        rng = random.Random(1000 + index)
        run, ledger = self.run, self.ledger
        riding: list = []
        """Acks that go with the next receive."""
        late: list = []
        """Messages held past their lease, acked after it ended."""
        giving_back: list = []
        """Nacks not sent yet: a few receives' worth go in one request."""
        given_since = time.monotonic()
        with SimpleConsumer(
            run.endpoint,
            run.credentials,
            group,
            self.names(keys),
            await_duration=AWAIT_S,
            notifications=True,  # an idle consumer waits on the channel, it does not poll
        ) as consumer:
            while not run.stop_all.is_set():
                acks, riding = riding, []
                try:
                    results, got = consumer.receive_and_ack(acks, RECEIVE_MAX, INVISIBLE_S)
                except MQError as exc:
                    ledger.count(f"receive: {type(exc).__name__}")
                    self.ack(consumer, group, acks)  # their outcome is unknown: ack again
                    time.sleep(0.2)
                    continue
                self.record_acks(group, acks, results)
                ledger.count(f"receives {keys}")
                ledger.count(f"received {keys}", len(got))
                now = run.now_ms()
                for view in got:
                    self.record(group, view, now)
                draining = run.draining.is_set()
                for view in got:
                    roll = rng.random()
                    if is_poison(view.body):  # given back until it is a dead letter
                        giving_back.append(view)
                    elif draining or roll < 0.86:
                        riding.append(view)
                    elif roll < 0.9:
                        giving_back.append(view)
                    elif roll < 0.94:
                        late.append(view)
                        ledger.count("late acks")
                    elif roll < 0.95:
                        try:  # a longer lease, acked with the new handle
                            riding.append(consumer.change_invisible_duration(view, 2 * INVISIBLE_S))
                        except MQError as exc:
                            ledger.count(f"invisible: {type(exc).__name__}")
                    else:
                        ledger.count("left to expire")
                now = run.now_ms()
                due = [v for v in late if draining or (v.invisible_until or 0) < now]
                if due:
                    late = [v for v in late if v not in due]
                    riding.extend(due)
                if not giving_back:
                    given_since = time.monotonic()
                elif (
                    len(giving_back) >= NACK_BATCH or time.monotonic() - given_since > NACK_AFTER_S
                ):
                    self.nack(consumer, giving_back)
                    giving_back = []
            self.ack(consumer, group, riding + late)

    def nack(self, consumer: SimpleConsumer, views: list) -> None:
        try:
            results = consumer.nack_batch(views)
        except MQError as exc:  # given back or not: either way the message comes again
            self.ledger.count(f"nack: {type(exc).__name__}")
            return
        self.ledger.count("nacks", sum(r.status is AckStatus.ACKED for r in results))

    def ack(self, consumer: SimpleConsumer, group: str, views: list) -> None:
        """Ack ``views`` on their own until the service answers (acking twice is fine)."""
        for _ in range(ACK_TRIES):
            if not views:
                return
            try:
                results = consumer.ack_batch(views)
            except MQError as exc:
                self.ledger.count(f"ack: {type(exc).__name__}")
                time.sleep(0.5)
                continue
            self.record_acks(group, views, results)
            return

    def record_acks(self, group: str, views: list, results: list) -> None:
        for view, result in zip(views, results, strict=True):
            if result.status is AckStatus.ACKED:
                self.ledger.record_ack(group, view.message_id, view.delivery_attempt)
            else:
                self.ledger.count(f"ack {result.status.value}")

    def record(self, group: str, view, now: int) -> None:
        """A delivery, judged at the end (a send's answer may reach the ledger after its
        message reached a consumer)."""
        leased_at = view.invisible_until - INVISIBLE_S * 1000 if view.invisible_until else now
        self.ledger.record_delivery(
            Delivery(
                group,
                view.message_id,
                view.body.decode(errors="replace"),
                view.delivery_attempt,
                leased_at,
                view.stored_timestamp or None,
            )
        )

    def settled(self) -> bool:
        return True

    # -------------------------------------------------------------- end
    def collect_dead(self) -> None:
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            for group in self.ledger.groups:
                start: int | None = 0
                while start is not None:
                    page = admin.list_dead_letters(group, limit=100, start=start)
                    for letter in page.dead_letters:
                        body = letter.body_preview.decode(errors="replace")
                        self.ledger.record_dead(group, letter.message_id, body)
                    start = page.next_start
