"""Soak: every feature at once against a running stack, over HTTP with the SDK.

    .venv/bin/python tests/reliability/soak.py --seconds 90

Starts its own local stack on loopback (``cirrusmq.testing.LocalStack``) unless
``--endpoint`` is given (credentials from CIRRUSMQ_ACCESS_KEY / CIRRUSMQ_SECRET_KEY). For
``--seconds`` it runs 8 producers (normal messages, delays, FIFO message groups) and a
transactional producer (commits and rollbacks) against 8 consumers in two groups (acks,
nacks, messages left to expire, late acks of expired handles, change of invisible duration);
on a local stack a clock thread moves the stack's time on so that leases expire and
backoffs come due. Then it stops producing, drains every group, lists the dead letters and
judges. The last line is

    sent S, acked A, dead-lettered D, lost L, duplicate acks U, early E, rolled-back visible R

counted per (group, message); L, U, E and R must be 0 (exit status 1 otherwise). Bounded:
at most ``--max-messages`` sends in all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from cirrusmq import (
    AckStatus,
    Admin,
    Credentials,
    Message,
    MQError,
    Producer,
    SimpleConsumer,
    TransactionProducer,
    TransactionResolution,
)

PRODUCERS, CONSUMERS = 8, 8
INVISIBLE_S = 10
MAX_ATTEMPTS = 3


@dataclass
class Ledger:
    """Everything the soak saw, shared by its threads (under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: dict[str, tuple[str, int]] = field(default_factory=dict)
    """message id → (topic, due ms or 0) of every send that answered."""
    uncertain: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    deliveries: Counter[tuple[str, str]] = field(default_factory=Counter)
    acked_on: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    """(group, message id) → the receipt handles whose ack answered acked."""
    seen: list[tuple[str, str, bytes, int]] = field(default_factory=list)
    """Every delivery: (group, message id, body, broker time of the receive)."""
    errors: Counter[str] = field(default_factory=Counter)
    nacks: int = 0
    expiries: int = 0
    late_acks: int = 0


class Soak:
    def __init__(
        self,
        endpoint: str,
        credentials: Credentials,
        *,
        local: object | None,
        seconds: float,
        max_messages: int,
    ) -> None:
        self.endpoint, self.credentials, self.local = endpoint, credentials, local
        self.seconds, self.max_messages = seconds, max_messages
        run = uuid.uuid4().hex[:6]
        self.topics = {"n": f"soak-{run}-n", "f": f"soak-{run}-f", "x": f"soak-{run}-x"}
        self.groups = {f"soak-{run}-a": ("n", "f", "x"), f"soak-{run}-b": ("n",)}
        self.ledger = Ledger()
        self.stop_producing = threading.Event()
        self.draining = threading.Event()
        self.stop_all = threading.Event()
        self.budget = threading.Semaphore(max_messages)
        self.last_delivery = time.monotonic()
        self.advances = 0
        """How often the clock thread moved a local stack's time on."""
        self.delivered_at_advance = 0

    def now_ms(self) -> int:
        """The broker's clock (the local stack's runs ahead of the wall clock)."""
        if self.local is not None:
            from cirrusmq_broker.clock import now_ms

            return now_ms()
        return time.time_ns() // 1_000_000

    # -------------------------------------------------------------- setup
    def setup(self) -> None:
        with Admin(self.endpoint, self.credentials) as admin:
            admin.create_topic(self.topics["n"], queues=8)
            admin.create_topic(self.topics["f"], queues=4, message_type="FIFO")
            admin.create_topic(self.topics["x"], queues=4, message_type="TRANSACTION")
            for group in self.groups:
                admin.update_group(group, max_delivery_attempts=MAX_ATTEMPTS)
        for group, topics in self.groups.items():  # subscribed before anything is sent
            names = [self.topics[t] for t in topics]
            with SimpleConsumer(
                self.endpoint, self.credentials, group, names, await_duration=0
            ) as consumer:
                consumer.receive(1, INVISIBLE_S)

    # -------------------------------------------------------------- producers
    def produce(self, index: int) -> None:
        rng = random.Random(index)
        with Producer(self.endpoint, self.credentials, linger_ms=2) as producer:
            k = 0
            while not self.stop_producing.is_set():
                batch = []
                for _ in range(rng.randint(1, 4)):
                    if not self.budget.acquire(blocking=False):
                        self.stop_producing.wait(0.2)
                        break
                    k += 1
                    body = f"p{index}-{k}".encode()
                    roll = rng.random()
                    if roll < 0.15:
                        batch.append(Message(self.topics["f"], body, message_group=f"fg{k % 5}"))
                    elif roll < 0.35:
                        batch.append(
                            Message(self.topics["n"], body, delay_level=rng.choice((1, 2)))
                        )
                    else:
                        batch.append(Message(self.topics["n"], body, tag="soak"))
                for message in batch:
                    try:
                        receipt = producer.send(message)
                    except MQError as exc:
                        with self.ledger.lock:
                            self.ledger.errors[f"send: {type(exc).__name__}"] += 1
                        continue
                    due = receipt.delivery_timestamp or 0
                    topic = "f" if message.topic == self.topics["f"] else "n"
                    with self.ledger.lock:
                        if receipt.pending:
                            self.ledger.uncertain.add(receipt.message_id)
                        else:
                            self.ledger.sent[receipt.message_id] = (topic, due)
                self.stop_producing.wait(rng.uniform(0, 0.05))

    def transact(self) -> None:
        rng = random.Random(99)
        decided: dict[str, TransactionResolution] = {}

        def checker(view: object) -> TransactionResolution:
            return decided.get(getattr(view, "transaction_id", ""), TransactionResolution.ROLLBACK)

        with TransactionProducer(
            self.endpoint, self.credentials, producer_group="soak-pg", checker=checker
        ) as producer:
            while not self.stop_producing.is_set():
                if not self.budget.acquire(blocking=False):
                    break
                txn = producer.begin_transaction()
                ids = []
                try:
                    for i in range(rng.randint(1, 3)):
                        receipt = txn.send(Message(self.topics["x"], f"t{txn.id}-{i}".encode()))
                        ids.append(receipt.message_id)
                    commit = rng.random() < 0.8
                    decided[txn.id] = (
                        TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK
                    )
                    if commit:
                        txn.commit()
                    else:
                        txn.rollback()
                except MQError as exc:
                    with self.ledger.lock:
                        self.ledger.errors[f"transaction: {type(exc).__name__}"] += 1
                        self.ledger.uncertain.update(ids)
                    continue
                with self.ledger.lock:
                    for message_id in ids:
                        if commit:
                            self.ledger.sent[message_id] = ("x", 0)
                        else:
                            self.ledger.rolled_back.add(message_id)
                self.stop_producing.wait(rng.uniform(0, 0.1))

    # -------------------------------------------------------------- consumers
    def consume(self, index: int) -> None:
        rng = random.Random(1000 + index)
        group = list(self.groups)[index % 2]
        names = [self.topics[t] for t in self.groups[group]]
        late: list[object] = []
        with SimpleConsumer(
            self.endpoint, self.credentials, group, names, await_duration=1
        ) as consumer:
            while not self.stop_all.is_set():
                try:
                    got = consumer.receive(16, INVISIBLE_S)
                except MQError as exc:
                    with self.ledger.lock:
                        self.ledger.errors[f"receive: {type(exc).__name__}"] += 1
                    time.sleep(0.2)
                    continue
                now = self.now_ms()
                for view in got:
                    self.record(group, view, now)
                draining = self.draining.is_set()
                acks, nacks = [], []
                for view in got:
                    roll = rng.random()
                    if draining or roll < 0.75:
                        acks.append(view)
                    elif roll < 0.85:
                        nacks.append(view)
                    elif roll < 0.9:
                        late.append(view)  # acked after its lease expired
                        with self.ledger.lock:
                            self.ledger.late_acks += 1
                    elif roll < 0.95:
                        with contextlib.suppress(
                            MQError
                        ):  # a longer lease, acked with the new handle
                            acks.append(consumer.change_invisible_duration(view, 2 * INVISIBLE_S))
                    else:
                        with self.ledger.lock:
                            self.ledger.expiries += 1  # left to expire
                if len(late) > 8 or (draining and late):
                    acks.extend(late)
                    late.clear()
                self.ack(consumer, group, acks)
                for view in nacks:
                    try:
                        consumer.nack(view)
                        with self.ledger.lock:
                            self.ledger.nacks += 1
                    except MQError as exc:
                        with self.ledger.lock:
                            self.ledger.errors[f"nack: {type(exc).__name__}"] += 1

    def ack(self, consumer: SimpleConsumer, group: str, views: list) -> None:
        if not views:
            return
        try:
            results = consumer.ack_batch(views)
        except MQError as exc:
            with self.ledger.lock:
                self.ledger.errors[f"ack: {type(exc).__name__}"] += 1
            return
        with self.ledger.lock:
            for view, result in zip(views, results, strict=True):
                if result.status is AckStatus.ACKED:
                    self.ledger.acked_on[(group, view.message_id)].add(view.receipt_handle)

    def record(self, group: str, view: object, now: int) -> None:
        """A delivery, judged at the end (a send's answer may reach the ledger after its
        message reached a consumer)."""
        self.last_delivery = time.monotonic()
        self.delivered_at_advance = self.advances
        leased_at = view.invisible_until - INVISIBLE_S * 1000 if view.invisible_until else now
        with self.ledger.lock:
            self.ledger.deliveries[(group, view.message_id)] += 1
            self.ledger.seen.append((group, view.message_id, view.body, leased_at))

    # -------------------------------------------------------------- time
    def clock(self) -> None:
        """A local stack's time moves on: leases expire, backoffs and delays come due."""
        while not self.stop_all.wait(2.0):
            self.local.advance_time(INVISIBLE_S)  # type: ignore[attr-defined]
            self.advances += 1

    # -------------------------------------------------------------- run and judge
    def run(self) -> int:
        self.setup()
        threads = [
            threading.Thread(target=self.produce, args=(i,), daemon=True) for i in range(PRODUCERS)
        ]
        threads.append(threading.Thread(target=self.transact, daemon=True))
        consumers = [
            threading.Thread(target=self.consume, args=(i,), daemon=True) for i in range(CONSUMERS)
        ]
        if self.local is not None:
            consumers.append(threading.Thread(target=self.clock, daemon=True))
        for t in threads + consumers:
            t.start()
        time.sleep(self.seconds)
        self.stop_producing.set()
        for t in threads:
            t.join(60)
        self.draining.set()
        drain_until = time.monotonic() + max(120.0, 2 * self.seconds)
        quiet_from = self.advances
        while time.monotonic() < drain_until:
            time.sleep(1.0)
            if self.local is not None:  # 8 moves of 10 s: past every lease and backoff
                if self.advances - max(quiet_from, self.delivered_at_advance) >= 8:
                    break
            elif time.monotonic() - self.last_delivery > 3 * 60:
                break
        self.stop_all.set()
        for t in consumers:
            t.join(30)
        return self.judge()

    def dead_letters(self) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        with Admin(self.endpoint, self.credentials) as admin:
            for group in self.groups:
                start: int | None = 0
                while start is not None:
                    page = admin.list_dead_letters(group, limit=100, start=start)
                    found.update((group, d.message_id) for d in page.dead_letters)
                    start = page.next_start
        return found

    def judge(self) -> int:
        ledger = self.ledger
        dead = self.dead_letters()
        sent = {m: t for m, t in ledger.sent.items() if m not in ledger.rolled_back}
        acked = lost = duplicate = 0
        missing: list[str] = []
        for group, topics in self.groups.items():
            for message_id, (topic, _) in sent.items():
                if topic not in topics:
                    continue
                handles = ledger.acked_on.get((group, message_id), set())
                acked += bool(handles)
                duplicate += len(handles) > 1
                if not handles and (group, message_id) not in dead:
                    lost += 1
                    missing.append(f"{group} {message_id} ({topic})")
        early_seen, rolled_seen, unsent = [], [], []
        for group, message_id, body, at in ledger.seen:
            found = ledger.sent.get(message_id)
            if message_id in ledger.rolled_back:
                rolled_seen.append(f"{group} {message_id} {body!r}")
            elif found is None and message_id not in ledger.uncertain:
                unsent.append(f"{group} {message_id} {body!r}")
            elif found is not None and found[1] and at < found[1]:
                early_seen.append(f"{group} {message_id}: leased at {at}, due {found[1]}")
        early, rolled = len(early_seen), len(rolled_seen)
        print(f"topics {self.topics}; groups {list(self.groups)}")
        print(
            f"nacks {ledger.nacks}, left to expire {ledger.expiries}, late acks "
            f"{ledger.late_acks}, deliveries {sum(ledger.deliveries.values())}, "
            f"uncertain sends {len(ledger.uncertain)}, rolled back {len(ledger.rolled_back)}, "
            f"errors {dict(ledger.errors) or 'none'}"
        )
        for what, items in (
            ("lost", missing),
            ("early", early_seen),
            ("rolled-back visible", rolled_seen),
            ("delivered but never sent", unsent),
        ):
            if items:
                print(f"{what} ({len(items)}): {items[:20]}")
        acked_dead = sorted(k for k in dead if ledger.acked_on.get(k))
        if acked_dead:
            print(f"acked, yet dead-lettered ({len(acked_dead)}): {acked_dead[:20]}")
        dups = [k for k, v in ledger.acked_on.items() if len(v) > 1]
        if dups:
            print(f"acked on two deliveries ({len(dups)}): {dups[:20]}")
        print(
            f"sent {len(sent)}, acked {acked}, dead-lettered {len(dead)}, lost {lost}, "
            f"duplicate acks {duplicate}, early {early}, rolled-back visible {rolled}"
        )
        return 1 if lost or duplicate or early or rolled or unsent or acked_dead else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--endpoint", help="a running stack (default: start a local one)")
    parser.add_argument("--max-messages", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.endpoint:
        credentials = Credentials(
            os.environ["CIRRUSMQ_ACCESS_KEY"], os.environ["CIRRUSMQ_SECRET_KEY"]
        )
        return Soak(
            args.endpoint,
            credentials,
            local=None,
            seconds=args.seconds,
            max_messages=args.max_messages,
        ).run()
    from cirrusmq.testing import LocalStack

    with LocalStack(host="127.0.0.1") as stack:
        return Soak(
            stack.endpoint,
            stack.credentials,
            local=stack,
            seconds=args.seconds,
            max_messages=args.max_messages,
        ).run()


if __name__ == "__main__":
    sys.exit(main())
