"""Two containers' consumers acking, nacking, changing invisible time, acking late and
letting deliveries expire on one group at once, the clock moving on: an ``acked`` answer is
never followed by another delivery, no delivery is handed out twice, nothing is lost."""

from __future__ import annotations

import random
import threading
import time

from broker_helpers import send, serialised_aws_calls
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import BrokerError

MESSAGES = 120
RUN_SECONDS = 15.0


def test_mixed_consumers_of_two_containers_keep_acked_final_and_lose_nothing(
    broker, clock, monkeypatch
):
    serialised_aws_calls(monkeypatch)
    broker.admin.create_topic("t", queues=2)
    for start in range(0, MESSAGES, 10):
        send(broker, "t", *[b"%03d" % i for i in range(start, start + 10)])
    containers = [broker, Broker(broker.settings, clock)]
    lock = threading.Lock()
    deliveries: dict[bytes, list[int]] = {}
    acked_at: dict[bytes, list[int]] = {}  # attempts whose ack answered acked
    nacked_at: dict[bytes, list[int]] = {}  # attempts whose nack answered acked
    late: list = []
    stop, errors = threading.Event(), []

    def ack(container, message, handle) -> None:
        [outcome] = container.consume.ack("g", [handle])
        if outcome.status.value == "acked":
            with lock:
                acked_at.setdefault(message.message.body, []).append(message.delivery_attempt)

    def consumer(container, seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                got = container.consume.receive("g", "t", max_messages=5, invisible_seconds=10)
                with lock:
                    for m in got:
                        deliveries.setdefault(m.message.body, []).append(m.delivery_attempt)
                for m in got:
                    roll = rng.random()
                    if roll < 0.5:
                        ack(container, m, m.receipt_handle)
                    elif roll < 0.65:
                        [nacked] = container.retries.nack("g", [m.receipt_handle])
                        status = nacked.status
                        if status == "acked":
                            with lock:
                                nacked_at.setdefault(m.message.body, []).append(m.delivery_attempt)
                    elif roll < 0.75:
                        try:
                            changed = container.consume.change_invisible("g", m.receipt_handle, 10)
                        except BrokerError:
                            continue  # stale: moved on meanwhile
                        ack(container, m, rng.choice([m.receipt_handle, changed.receipt_handle]))
                    elif roll < 0.85:
                        with lock:
                            late.append((container, m))
                with lock:
                    due = [late.pop(0)] if late and rng.random() < 0.5 else []
                for c, m in due:
                    ack(c, m, m.receipt_handle)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def time_passes() -> None:
        while not stop.wait(0.05):
            clock.advance(1)

    threads = [threading.Thread(target=consumer, args=(containers[i % 2], i)) for i in range(4)] + [
        threading.Thread(target=time_passes)
    ]
    for t in threads:
        t.start()
    ends = time.monotonic() + RUN_SECONDS
    while time.monotonic() < ends and len(acked_at) < MESSAGES * 0.9:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    for c, m in late:  # what the consumers still held
        ack(c, m, m.receipt_handle)
    for _ in range(60):  # drain: everything not acked comes back (backoffs up to minutes)
        if len(acked_at) == MESSAGES:
            break
        clock.advance(60)
        for _ in range(3):
            got = broker.consume.receive("g", "t", max_messages=100, invisible_seconds=60)
            for m in got:
                deliveries.setdefault(m.message.body, []).append(m.delivery_attempt)
                ack(broker, m, m.receipt_handle)
    print(
        f"\n{sum(map(len, deliveries.values()))} deliveries of {MESSAGES} messages, "
        f"{sum(map(len, nacked_at.values()))} nacks"
    )
    for body, attempts in deliveries.items():
        assert len(attempts) == len(set(attempts)), (body, attempts)  # no delivery twice
        for k in acked_at.get(body, []):
            assert max(attempts) == k, (body, attempts, k)  # acked: never delivered again
        for k in nacked_at.get(body, []):
            assert k + 1 in attempts, (body, attempts, k)  # given back: delivered again
    assert set(acked_at) == {b"%03d" % i for i in range(MESSAGES)}  # nothing lost
    assert all(len(set(v)) == 1 for v in acked_at.values())
