"""Orderly push consumers on FIFO topics against the local stack: per-message-group order,
no loss, duplicates only within the contract, takeover after a consumer dies, rebalance,
failures redelivered in place."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from cirrusmq import ConsumeResult, Message, MessageView, Producer, PushConsumer

from ..helpers import wait_until


def produce(endpoint, credentials, topic: str, groups: int, per_group: int, start: int = 0) -> None:
    """``per_group`` messages ``<group>:<seq>`` for each message group, interleaved."""
    messages = [
        Message(topic, f"k{g}:{seq}", message_group=f"k{g}")
        for seq in range(start, start + per_group)
        for g in range(groups)
    ]
    with Producer(endpoint, credentials) as producer:
        for start in range(0, len(messages), 1000):
            producer.send_batch(messages[start : start + 1000])


class Log:
    """What every consumer processed successfully, in the order it happened."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, int, int]] = []
        """(consumer, message group, sequence number, delivery attempt)."""
        self.by_consumer: dict[str, set[tuple[str, int]]] = defaultdict(set)

    def listener(self, name: str, *, hang: threading.Event | None = None, release=None):
        def listen(message: MessageView) -> ConsumeResult:
            if hang is not None and hang.is_set():
                release.wait(60)  # a dead consumer: never finishes, never acks
                return ConsumeResult.FAILURE
            key, seq = message.text.split(":")
            with self.lock:
                self.events.append((name, key, int(seq), message.delivery_attempt))
                self.by_consumer[name].add((key, int(seq)))
            return ConsumeResult.SUCCESS

        return listen

    def distinct(self) -> int:
        with self.lock:
            return len({(k, s) for _, k, s, _ in self.events})

    def check(self, groups: int, per_group: int, may_repeat: set[tuple[str, int]]) -> int:
        """Every message once in order per message group; repeats only of ``may_repeat``
        (processed by a consumer that died before acking them), each after the takeover
        restarting from the first unacked one. Returns the number of repeats."""
        per_key: dict[str, list[int]] = defaultdict(list)
        for _, key, seq, _ in self.events:
            per_key[key].append(seq)
        assert len(per_key) == groups
        repeats = 0
        for key, seqs in per_key.items():
            first_seen: list[int] = []
            for seq in seqs:
                if seq in first_seen:
                    assert (key, seq) in may_repeat, (key, seq, seqs)
                    repeats += 1
                    continue
                assert seq == len(first_seen), f"{key}: {seq} after {first_seen[-3:]}"
                first_seen.append(seq)
            assert first_seen == list(range(per_group))
        return repeats


def orderly_consumer(endpoint, credentials, group, topic, listener, **options) -> PushConsumer:
    defaults = dict(
        consume_threads=8,
        receive_batch_size=64,
        invisible_duration_s=600,
        max_poll_interval_s=0.5,
        heartbeat_interval_s=1,
        heartbeat_timeout_s=120,
        suspend_s=0.1,
    )
    return PushConsumer(
        endpoint, credentials, group, [topic], listener, orderly=True, **{**defaults, **options}
    )


def run_three_with_one_killed(
    stack, endpoint, credentials, admin, make_topic, group, *, groups, per_group
):
    topic = make_topic("fifo", queues=8, message_type="FIFO")
    produce(endpoint, credentials, topic, groups, per_group)
    total = groups * per_group
    log = Log()
    hang, release = threading.Event(), threading.Event()
    victim = orderly_consumer(
        endpoint,
        credentials,
        group,
        topic,
        log.listener("victim", hang=hang, release=release),
        client_id="c-victim",
        invisible_duration_s=10,  # its lock lapses 30 s after its last receive
        heartbeat_timeout_s=5,
    ).start()
    survivors = [
        orderly_consumer(
            endpoint, credentials, group, topic, log.listener(name), client_id=f"c-{name}"
        ).start()
        for name in ("a", "b")
    ]
    try:
        wait_until(lambda: log.distinct() >= total // 3, timeout_s=120)
        # kill the victim: it hangs in its listeners, stops heartbeating, never deregisters
        hang.set()
        victim._stopping.set()
        victim._heartbeater.stop(deregister_now=False)
        victim._threads[0].join(30)  # its last receive (if one was under way) is over
        with log.lock:
            processed_by_victim = set(log.by_consumer["victim"])
        stack.advance_time(31)  # its registration (5 s) and its lock (30 s) lapse
        wait_until(lambda: log.distinct() == total, timeout_s=240)
        time.sleep(0.5)  # nothing more may come
        described = admin.describe_group(group, topic)
        assert sorted(c.client_id for c in described.consumers) == ["c-a", "c-b"]
        assert sorted(q for c in described.consumers for q in c.queues[topic]) == list(range(8))
    finally:
        for consumer in survivors:
            consumer.shutdown(timeout_s=10)
        release.set()
        victim.shutdown(timeout_s=5)
    repeats = log.check(groups, per_group, may_repeat=processed_by_victim)
    assert repeats <= 8 * 64  # at most one unacked batch per queue the victim held
    assert {name for name, *_ in log.events} == {"victim", "a", "b"}
    return log


def test_ten_thousand_messages_three_orderly_consumers_one_killed(
    cirrusmq_stack, endpoint, credentials, admin, make_topic, group
):
    """10,000 messages over 100 message groups (about 36 s here, so in the default run)."""
    run_three_with_one_killed(
        cirrusmq_stack, endpoint, credentials, admin, make_topic, group, groups=100, per_group=100
    )


def test_a_failing_message_is_retried_in_place_and_its_queue_waits(
    endpoint, credentials, make_topic, group
):
    topic = make_topic("fifo", queues=1, message_type="FIFO")
    produce(endpoint, credentials, topic, 1, 6)
    seen: list[tuple[int, int]] = []

    def listener(message: MessageView) -> ConsumeResult:
        seq = int(message.text.split(":")[1])
        seen.append((seq, message.delivery_attempt))
        if seq == 2 and message.delivery_attempt < 3:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    with orderly_consumer(endpoint, credentials, group, topic, listener):
        wait_until(lambda: [s for s, _ in seen][-1:] == [5])
    assert [s for s, _ in seen] == [0, 1, 2, 2, 2, 3, 4, 5]
    assert [a for s, a in seen if s == 2] == [1, 2, 3]  # the attempt count grows


def test_rebalance_on_join_and_leave_and_deregistration_frees_at_once(
    endpoint, credentials, admin, make_topic, group
):
    topic = make_topic("fifo", queues=4, message_type="FIFO")
    log = Log()
    first = orderly_consumer(
        endpoint, credentials, group, topic, log.listener("a"), client_id="a"
    ).start()
    try:
        [only] = admin.describe_group(group, topic).consumers
        assert only.queues[topic] == (0, 1, 2, 3) and only.orderly
        second = orderly_consumer(
            endpoint, credentials, group, topic, log.listener("b"), client_id="b"
        ).start()
        try:
            shares = {c.client_id: c.queues[topic] for c in admin.describe_group(group).consumers}
            assert shares == {"a": (0, 1), "b": (2, 3)}
            produce(endpoint, credentials, topic, 20, 5)
            wait_until(lambda: log.distinct() == 100)
            with log.lock:
                assert {name for name, *_ in log.events} == {"a", "b"}
        finally:
            second.shutdown()  # deregisters and releases its locks: no waiting for expiry
        [only] = admin.describe_group(group, topic).consumers
        assert only.queues[topic] == (0, 1, 2, 3)
        produce(endpoint, credentials, topic, 20, 1, start=5)  # lands on every queue, b's too
        wait_until(lambda: log.distinct() == 120, timeout_s=20)
    finally:
        first.shutdown()
    assert admin.describe_group(group, topic).consumers == ()
    log.check(20, 6, may_repeat=set())


def test_a_concurrent_push_consumer_shows_in_the_group(endpoint, credentials, admin, topic, group):
    listener = lambda m: ConsumeResult.SUCCESS  # noqa: E731
    with PushConsumer(endpoint, credentials, group, [topic], listener, client_id="plain-1"):
        [consumer] = admin.describe_group(group).consumers
        assert consumer.client_id == "plain-1" and not consumer.orderly
        assert consumer.queues == {topic: None}  # NORMAL topic: every queue, shared
    assert admin.describe_group(group).consumers == ()


def test_cli_group_describe_shows_the_live_consumers_and_their_queues(
    endpoint, credentials, make_topic, group, tmp_path, monkeypatch
):
    import json

    from cirrusmq.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    topic = make_topic("fifo", queues=3, message_type="FIFO")
    runner = CliRunner()
    listener = lambda m: ConsumeResult.SUCCESS  # noqa: E731
    with (
        orderly_consumer(endpoint, credentials, group, topic, listener, client_id="c1"),
        orderly_consumer(endpoint, credentials, group, topic, listener, client_id="c2"),
    ):
        shown = runner.invoke(app, ["group", "describe", group])
        assert shown.exit_code == 0, shown.output
        assert "c1" in shown.output and "orderly" in shown.output and "0,1" in shown.output
        as_json = json.loads(runner.invoke(app, ["group", "describe", group, "--json"]).output)
        queues = {c["client_id"]: c["queues"][topic] for c in as_json["consumers"]}
        assert queues == {"c1": [0, 1], "c2": [2]}
    assert "no live consumers" in runner.invoke(app, ["group", "describe", group]).output


def test_a_blocked_message_group_does_not_hold_back_another_group_of_its_queue(
    cirrusmq_stack, endpoint, credentials, admin, make_topic, group
):
    """The service hands out group b of a queue while group a's delivery is in flight: the
    consumer runs b's batch at once, so b never times out waiting behind a's blocked listener
    (no redelivery, no dead letter, processed once, at attempt 1)."""
    topic = make_topic("fifo", queues=1, message_type="FIFO")
    admin.update_group(group, max_delivery_attempts=2)
    release, a_started = threading.Event(), threading.Event()
    a_views: list[MessageView] = []
    b_seen: list[int] = []

    def listener(message: MessageView) -> ConsumeResult:
        if message.message_group == "a":
            a_views.append(message)
            a_started.set()
            release.wait(60)
        else:
            b_seen.append(message.delivery_attempt)
        return ConsumeResult.SUCCESS

    consumer = orderly_consumer(
        endpoint, credentials, group, topic, listener, invisible_duration_s=10
    ).start()
    try:
        with Producer(endpoint, credentials) as producer:
            producer.send(Message(topic, "a:0", message_group="a"))
            assert a_started.wait(30)
            # a's listener is slow but its delivery stays alive (as its renewals would)
            consumer._consumer.change_invisible_duration(a_views[0], 3600)
            producer.send(Message(topic, "b:0", message_group="b"))
        serializer = consumer._serializer
        assert serializer is not None
        wait_until(lambda: b_seen or serializer.waiting() >= 1)
        for attempt in (2, 3):  # b waits in the client: its invisible time runs out
            if b_seen:
                break
            cirrusmq_stack.advance_time(11)
            if attempt == 2:  # redelivered (attempt 2) and held behind a again
                wait_until(lambda: b_seen or serializer.waiting() >= 2)
            else:  # past max_delivery_attempts: the next receive dead-letters it
                wait_until(lambda: b_seen or admin.list_dead_letters(group, topic).dead_letters)
        release.set()
        wait_until(lambda: consumer.cached_messages == 0)
    finally:
        release.set()
        consumer.shutdown(timeout_s=10)
    assert b_seen == [1]
    assert not admin.list_dead_letters(group, topic).dead_letters
