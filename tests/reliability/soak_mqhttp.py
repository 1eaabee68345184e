"""The soak's RocketMQ HTTP side, through Aliyun's ``mq-http-sdk`` unmodified: a producer of
normal and delayed messages (``__STARTDELIVERTIME``), a transactional producer (commits,
rollbacks, and transactions left to the back-check, answered through
``consume_half_message``), and a consumer per topic (acks, messages left to expire)."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from functools import partial

from cirrusmq import Admin
from mq_http_sdk.mq_client import MQClient
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage
from soak_ledger import Delivery, Ledger
from soak_run import Run, wait_for_room

INSTANCE = "MQ_INST_soak"
"""The client sends an instance id; CirrusMQ ignores it."""
MAX_ATTEMPTS = 3
CONSUME_MAX = 16
"""The protocol's most messages per consume and handles per ack."""
LEASE_S = 300
"""A consumed message comes again this long after its delivery unless acked."""
CHECK_IMMUNITY_S = 10
CHECK_POLL_S = 3.0
"""How often the transactional producer asks for back-checks (each ask costs a few reads)."""
ACK_TRIES = 5


def mq_client(run: Run) -> MQClient:
    return MQClient(run.endpoint, run.credentials.access_key, run.credentials.secret_key)


def error_name(exc: Exception) -> str:
    return getattr(exc, "type", "") or type(exc).__name__


def nothing_came(exc: MQExceptionBase) -> bool:
    return getattr(exc, "type", "") == "MessageNotExist"


class MqHttpDriver:
    """Topics ``m`` (NORMAL) and ``t`` (TRANSACTION), one group id each."""

    protocol = "mqhttp"
    quiet_ms = (LEASE_S + 30 + 30) * 1000
    """Drained once this long passed without a delivery: the lease of a consumed message,
    the backoff before a last attempt (30 s) and a margin."""

    def __init__(self, run: Run) -> None:
        self.run = run
        prefix = f"soak-{run.run_id}"
        self.topics = {"m": f"{prefix}-m", "t": f"{prefix}-t"}
        self.groups = {"m": f"GID-{prefix}-m", "t": f"GID-{prefix}-t"}
        self.ledger = Ledger(self.protocol, {g: frozenset(k) for k, g in self.groups.items()})
        self.left_to_check: dict[str, tuple[bool, str, bool]] = {}
        """message id → (commit?, body, surely undecided?) of transactions decided when the
        service asks (those whose end failed may have ended: no check need come)."""

    # -------------------------------------------------------------- setup
    def setup(self) -> None:
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            admin.create_topic(self.topics["m"], queues=8)
            admin.create_topic(self.topics["t"], queues=4, message_type="TRANSACTION")
            for group in self.groups.values():
                admin.update_group(group, max_delivery_attempts=MAX_ATTEMPTS)

    def producers(self) -> list[Callable[[], None]]:
        return [self.produce, self.transact]

    def consumers(self) -> list[Callable[[], None]]:
        return [partial(self.consume, "m"), partial(self.consume, "tm")]

    def settled(self) -> bool:
        """No transaction waits for its back-check."""
        return not any(undecided for _, _, undecided in self.left_to_check.values())

    # -------------------------------------------------------------- producers
    def produce(self) -> None:
        """One message per request (the protocol has no batch publish); some delayed."""
        rng = random.Random(11)
        run, ledger = self.run, self.ledger
        client = mq_client(run)
        producer = client.get_producer(INSTANCE, self.topics["m"])
        k = 0
        try:
            while wait_for_room(run, ledger) and run.take(1):
                k += 1
                body = f"mq-{k}"
                message = TopicMessage(body, "soak")
                due = 0
                if rng.random() < 0.2:
                    due = run.now_ms() + rng.choice((10, 30, 60)) * 1000
                    message.set_start_deliver_time(due)
                try:
                    answer = producer.publish_message(message)
                except MQExceptionBase as exc:
                    ledger.count(f"publish: {error_name(exc)}")
                    ledger.record_uncertain(body)
                    continue
                ledger.record_sent(answer.message_id, "m", due)
        finally:
            client.close_connection()

    def transact(self) -> None:
        """Half messages committed or rolled back at once, or left to the back-check; the
        back-checks are answered until every such transaction is decided."""
        rng = random.Random(12)
        run, ledger = self.run, self.ledger
        client = mq_client(run)
        producer = client.get_trans_producer(
            INSTANCE, self.topics["t"], f"GID-soak-{run.run_id}-tp"
        )
        k, checked = 0, time.monotonic()
        try:
            while not run.stop_all.is_set():
                if not run.stop_producing.is_set() and wait_for_room(run, ledger) and run.take(1):
                    k += 1
                    self.publish_half(producer, f"mqt-{k}", rng.random())
                else:
                    time.sleep(0.5)
                if time.monotonic() - checked > CHECK_POLL_S:
                    self.answer_checks(producer)
                    checked = time.monotonic()
        finally:
            client.close_connection()

    def publish_half(self, producer, body: str, roll: float) -> None:
        ledger = self.ledger
        message = TopicMessage(body, "txn")
        message.set_trans_check_immunity_time(CHECK_IMMUNITY_S)
        try:
            half = producer.publish_message(message)
        except MQExceptionBase as exc:
            ledger.count(f"publish half: {error_name(exc)}")
            ledger.record_uncertain(body)
            return
        commit = roll < 0.8
        if roll >= 0.9:  # decided when the service asks
            self.left_to_check[half.message_id] = (commit, body, True)
            return
        try:
            if commit:
                producer.commit(half.receipt_handle)
            else:
                producer.rollback(half.receipt_handle)
        except MQExceptionBase as exc:
            ledger.count(f"{'commit' if commit else 'rollback'}: {error_name(exc)}")
            ledger.record_uncertain(body)
            self.left_to_check[half.message_id] = (commit, body, False)  # a check may come
            return
        self.decided(half.message_id, body, commit)

    def answer_checks(self, producer) -> None:
        try:
            checks = producer.consume_half_message(CONSUME_MAX, 0)
        except MQExceptionBase as exc:
            if not nothing_came(exc):
                self.ledger.count(f"back-checks: {error_name(exc)}")
            return
        for check in checks:
            decision = self.left_to_check.get(check.message_id)
            if decision is None:
                self.ledger.count("back-checks of transactions being ended")
                continue
            commit, body, _ = decision
            try:
                if commit:
                    producer.commit(check.receipt_handle)
                else:
                    producer.rollback(check.receipt_handle)
            except MQExceptionBase as exc:
                self.ledger.count(f"check answer: {error_name(exc)}")
                continue
            del self.left_to_check[check.message_id]
            self.ledger.count("back-checks answered")
            self.decided(check.message_id, body, commit)

    def decided(self, message_id: str, body: str, commit: bool) -> None:
        if commit:
            self.ledger.record_sent(message_id, "t")
        else:
            self.ledger.record_rolled_back(message_id, body)

    # -------------------------------------------------------------- consumers
    def consume(self, keys: str) -> None:
        """Consume the topics of ``keys`` in turn (the transactional topic is quiet: its
        consumer also serves the busy one)."""
        rng = random.Random(f"mqhttp-{keys}")
        run, ledger = self.run, self.ledger
        client = mq_client(run)
        consumers = [
            (key, client.get_consumer(INSTANCE, self.topics[key], self.groups[key])) for key in keys
        ]
        try:
            for key, consumer in itertools.cycle(consumers):
                if run.stop_all.is_set():
                    break
                group = self.groups[key]
                ledger.count(f"receives {key}")
                try:
                    got = consumer.consume_message(CONSUME_MAX, 1)
                except MQExceptionBase as exc:
                    if not nothing_came(exc):
                        ledger.count(f"consume: {error_name(exc)}")
                        time.sleep(0.2)
                    continue
                ledger.count(f"received {key}", len(got))
                draining = run.draining.is_set()
                acks = []
                for message in got:
                    self.record(group, message)
                    if draining or rng.random() < 0.96:
                        acks.append(message)
                    else:
                        ledger.count("left to expire")
                if acks:
                    self.ack(consumer, group, acks)
        finally:
            client.close_connection()

    def ack(self, consumer, group: str, messages: list) -> None:
        """Ack, again after an error that names no handle (its outcome unknown)."""
        for _ in range(ACK_TRIES):
            try:
                consumer.ack_message([m.receipt_handle for m in messages])
                failed: set[str] = set()
            except MQExceptionBase as exc:
                errors = getattr(exc, "sub_errors", None)
                if not errors:
                    self.ledger.count(f"ack: {error_name(exc)}")
                    time.sleep(0.5)
                    continue
                failed = {e.get("ReceiptHandle", "") for e in errors}
                self.ledger.count("ack not acked", len(failed))
            for message in messages:
                if message.receipt_handle not in failed:
                    self.ledger.record_ack(group, message.message_id, int(message.consumed_times))
            return

    def record(self, group: str, message) -> None:
        self.ledger.record_delivery(
            Delivery(
                group,
                message.message_id,
                message.message_body,
                int(message.consumed_times),
                int(message.first_consume_time),
            )
        )

    # -------------------------------------------------------------- end
    def collect_dead(self) -> None:
        with Admin(self.run.endpoint, self.run.credentials) as admin:
            for group in self.groups.values():
                start: int | None = 0
                while start is not None:
                    page = admin.list_dead_letters(group, limit=100, start=start)
                    for letter in page.dead_letters:
                        body = letter.body_preview.decode(errors="replace")
                        self.ledger.record_dead(group, letter.message_id, body)
                    start = page.next_start
