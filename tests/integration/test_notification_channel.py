"""The notification channel over a real socket against the local stack: an idle consumer
waits on it and wakes on a send; keys are checked; a dropped connection falls back to polling
and comes back. No timings are asserted: waits are bounded, what is asserted is what
happened (notifications received, receives made)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from api_helpers import make_topic, new_key, signed_client
from cirrusmq import ConsumeResult, Message, Producer, PushConsumer
from cirrusmq.consumer.channel import CONNECT_PATH, channel_for
from cirrusmq.signing import sign
from cirrusmq.transport import Transport
from cirrusmq_broker import clock
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect


def eventually(predicate: Callable[[], bool], timeout_s: float = 60) -> bool:
    """Wait for ``predicate`` (bounded; never a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Counted:
    """A push consumer whose receives are counted."""

    def __init__(self, stack, topic: str, group: str) -> None:
        self.received = threading.Event()
        self.consumer = PushConsumer(
            stack.endpoint,
            stack.credentials,
            group,
            [topic],
            self._listener,
            heartbeat_interval_s=None,
        )
        self.receives = 0
        inner = self.consumer._consumer.receive

        def receive(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.receives += 1
            return inner(*args, **kwargs)

        self.consumer._consumer.receive = receive

    def _listener(self, message) -> ConsumeResult:  # noqa: ANN001
        self.received.set()
        return ConsumeResult.SUCCESS

    @property
    def idle(self):  # noqa: ANN201
        return self.consumer._idle

    def waiting_on_channel(self) -> bool:
        waiter = self.idle.waiter
        return waiter is not None and waiter.registered and self.idle.channel_waits > 0


@pytest.fixture
def topic(cirrusmq_stack) -> str:
    name = f"ws-{uuid.uuid4().hex[:10]}"
    with signed_client(cirrusmq_stack) as admin:
        make_topic(admin, name, queues=2)
    return name


def send_one(stack, topic: str) -> None:
    with Producer(stack.endpoint, stack.credentials) as producer:
        producer.send(Message(topic, body=b"wake up"))


def test_an_idle_consumer_waits_on_the_channel_and_wakes_on_a_send(cirrusmq_stack, topic):
    counted = Counted(cirrusmq_stack, topic, f"g-{uuid.uuid4().hex[:8]}")
    counted.consumer.start()
    try:
        assert eventually(counted.waiting_on_channel)
        channel = counted.idle._channel
        notifications, receives = channel.notifications, counted.receives
        send_one(cirrusmq_stack, topic)
        assert counted.received.wait(60)
        # the safety poll is minutes away: only the notification can have woken it
        assert channel.notifications > notifications
        assert counted.receives - receives <= 2
    finally:
        counted.consumer.shutdown(10)


def test_a_dropped_connection_falls_back_to_polling_and_reconnects(cirrusmq_stack, topic):
    counted = Counted(cirrusmq_stack, topic, f"g-{uuid.uuid4().hex[:8]}")
    counted.consumer.start()
    try:
        assert eventually(counted.waiting_on_channel)
        channel = counted.idle._channel
        connects, receives = channel.connects, counted.receives
        gateway = cirrusmq_stack.websocket
        for connection_id in list(gateway._open):
            gateway.close_connection(connection_id)
        assert eventually(lambda: counted.receives > receives)  # woken: it polls at once
        assert eventually(lambda: channel.connects > connects and counted.waiting_on_channel())
        notifications = channel.notifications
        send_one(cirrusmq_stack, topic)
        assert counted.received.wait(60)
        assert channel.notifications > notifications
    finally:
        counted.consumer.shutdown(10)


def signed_headers(credentials) -> dict[str, str]:
    return sign("GET", "http://channel" + CONNECT_PATH, b"", credentials, now=clock.now_ms() / 1000)


def test_connect_is_signed_and_a_key_waits_only_where_it_may_consume(cirrusmq_stack, topic):
    url = cirrusmq_stack.ws_endpoint
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=10).close()
    assert refused.value.response.status_code == 401
    with signed_client(cirrusmq_stack) as admin:
        narrow = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["rv-*"]}]})
    with connect(url, additional_headers=signed_headers(narrow), open_timeout=10) as socket:
        socket.send(json.dumps({"action": "wait", "group": "rv-g", "topics": [topic]}))
        denied = json.loads(socket.recv(timeout=30))
        socket.send(json.dumps({"action": "wait", "group": "rv-g"}))
        bad = json.loads(socket.recv(timeout=30))
        socket.send("not json")
        garbled = json.loads(socket.recv(timeout=30))
    assert (denied["type"], denied["code"]) == ("error", "AccessDenied")
    assert (bad["code"], garbled["code"]) == ("InvalidRequest", "InvalidRequest")
    dynamodb = cirrusmq_stack.boto3_client("dynamodb")
    stored = dynamodb.query(
        TableName=cirrusmq_stack.resources["ConnectionsTable"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"t#{topic}"}},
    )["Items"]
    assert stored == []  # nothing registered for the refused waits


def test_a_consumer_whose_key_may_not_wait_polls_instead(cirrusmq_stack):
    with signed_client(cirrusmq_stack) as admin:
        name = f"rv-{uuid.uuid4().hex[:8]}"
        make_topic(admin, name, queues=1)
        narrow = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["other-*"]}]})
    transport = Transport(cirrusmq_stack.endpoint, narrow)
    try:
        transport.request("GET", "/v1/topics")  # learns the stack's clock, as a consumer has
        channel = channel_for(transport)
        assert channel is not None
        waiter = channel.waiter("rv-g", [name], threading.Event())
        assert not waiter.register()
        assert waiter.refused == "AccessDenied"
        waiter.close()
    finally:
        transport.close()


def test_a_simple_consumer_receive_waits_on_the_channel(cirrusmq_stack, topic):
    from cirrusmq import SimpleConsumer

    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = SimpleConsumer(
        cirrusmq_stack.endpoint,
        cirrusmq_stack.credentials,
        group,
        [topic],
        await_duration=20,
        notifications=True,
    )
    result: list = []
    try:
        receiver = threading.Thread(target=lambda: result.extend(consumer.receive(10)))
        receiver.start()
        assert eventually(lambda: consumer._idle.channel_waits > 0)
        channel = consumer._idle._channel
        notifications = channel.notifications
        send_one(cirrusmq_stack, topic)
        receiver.join(60)
        assert [m.body for m in result] == [b"wake up"]
        assert channel.notifications > notifications  # woken by the channel
        consumer.ack_batch(result)
    finally:
        consumer.close()


def test_an_async_receive_waits_on_the_channel(cirrusmq_stack, topic):
    import asyncio

    from cirrusmq.aio import AsyncSimpleConsumer

    async def scenario() -> tuple[list, int, int]:
        consumer = AsyncSimpleConsumer(
            cirrusmq_stack.endpoint,
            cirrusmq_stack.credentials,
            f"g-{uuid.uuid4().hex[:8]}",
            [topic],
            await_duration=20,
            notifications=True,
        )
        try:
            receiving = asyncio.create_task(consumer.receive(10))
            while not consumer._idle.channel_waits:
                await asyncio.sleep(0.05)
            channel = consumer._idle._channel
            before = channel.notifications
            await asyncio.to_thread(send_one, cirrusmq_stack, topic)
            messages = await asyncio.wait_for(receiving, 60)
            await consumer.ack_batch(messages)
            return messages, before, channel.notifications
        finally:
            await consumer.close()

    messages, before, after = asyncio.run(scenario())
    assert [m.body for m in messages] == [b"wake up"]
    assert after > before


def test_a_deeply_nested_frame_is_refused_and_the_connection_stays(cirrusmq_stack, topic):
    """A frame within API Gateway's size limit whose JSON nests deeper than a parser
    recurses is bad input: an InvalidRequest frame, the connection keeps working."""
    url = cirrusmq_stack.ws_endpoint
    nested = "[" * 60_000 + "]" * 60_000
    frames = [nested, '{"action": "wait", "group": "g", "topics": ' + nested + "}"]
    with connect(url, additional_headers=signed_headers(cirrusmq_stack.credentials)) as socket:
        replies = []
        for frame in frames:
            socket.send(frame)
            replies.append(json.loads(socket.recv(timeout=30)))
        socket.send(json.dumps({"action": "wait", "group": "g-nest", "topics": [topic]}))
        after = json.loads(socket.recv(timeout=30))
    assert [r.get("code") for r in replies] == ["InvalidRequest", "InvalidRequest"]
    assert after["type"] == "waiting"


def test_an_error_frame_names_the_wait_it_refuses(cirrusmq_stack, topic):
    """A client with several registrations in flight refuses only the one named."""
    with signed_client(cirrusmq_stack) as admin:
        narrow = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["rv-*"]}]})
    url = cirrusmq_stack.ws_endpoint
    with connect(url, additional_headers=signed_headers(narrow), open_timeout=10) as socket:
        socket.send(json.dumps({"action": "wait", "group": "rv-g", "topics": [topic, topic]}))
        denied = json.loads(socket.recv(timeout=30))
    assert denied["code"] == "AccessDenied"
    assert (denied["group"], denied["topics"]) == ("rv-g", [topic])


def test_a_message_whose_lease_ended_reaches_a_consumer_idle_on_the_channel(cirrusmq_stack, topic):
    """Consumer A receives a message and never acks it (a crashed process). No append
    announces its return: B, idle on the channel, looks again when A's lease ends (its
    last receive's ``next_due_ms``), which moves the message to the retry topic, then when
    the retry's backoff has passed — long before B's safety poll (minutes away)."""
    from cirrusmq import SimpleConsumer

    group = f"g-{uuid.uuid4().hex[:8]}"
    send_one(cirrusmq_stack, topic)
    with SimpleConsumer(
        cirrusmq_stack.endpoint, cirrusmq_stack.credentials, group, [topic], await_duration=5
    ) as crashed:
        assert [m.body for m in crashed.receive(1, invisible_duration=10)] == [b"wake up"]
    counted = Counted(cirrusmq_stack, topic, group)
    counted.consumer.start()
    try:
        assert eventually(counted.waiting_on_channel)
        cirrusmq_stack.advance_time(11)  # A's lease has ended
        assert counted.received.wait(90)
    finally:
        counted.consumer.shutdown(10)


def test_a_message_another_consumer_nacked_reaches_a_consumer_idle_on_the_channel(
    cirrusmq_stack, topic
):
    """Consumer A holds a message (for 5 minutes) while B goes idle on the channel, then
    gives it back (nack). The nack's append to the group's retry topic tells B, whose
    receive answers when the retry is due: B receives it then, long before A's lease
    would have ended or B's safety poll."""
    from cirrusmq import SimpleConsumer

    group = f"g-{uuid.uuid4().hex[:8]}"
    send_one(cirrusmq_stack, topic)
    counted = Counted(cirrusmq_stack, topic, group)
    with SimpleConsumer(
        cirrusmq_stack.endpoint, cirrusmq_stack.credentials, group, [topic], await_duration=5
    ) as other:
        [held] = other.receive(1, invisible_duration=300)
        counted.consumer.start()
        try:
            assert eventually(counted.waiting_on_channel)
            notifications = counted.idle._channel.notifications
            other.nack(held)
            assert eventually(lambda: counted.idle._channel.notifications > notifications)
            assert counted.received.wait(90)
        finally:
            counted.consumer.shutdown(10)


def stored_waiters(stack, topic: str) -> list[dict]:
    return stack.boto3_client("dynamodb").query(
        TableName=stack.resources["ConnectionsTable"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"t#{topic}"}},
        ConsistentRead=True,
    )["Items"]


def test_a_wait_whose_key_was_disabled_is_closed_not_told(cirrusmq_stack, topic):
    """A key disabled after its connection registered: the next append closes that
    connection (no "look now" reaches it) and forgets its waiters."""
    with signed_client(cirrusmq_stack) as admin:
        doomed = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["ws-*"]}]})
        url = cirrusmq_stack.ws_endpoint
        with connect(url, additional_headers=signed_headers(doomed), open_timeout=10) as socket:
            socket.send(json.dumps({"action": "wait", "group": "rv-g", "topics": [topic]}))
            assert json.loads(socket.recv(timeout=30))["type"] == "waiting"
            disabled = admin.post(f"/v1/keys/{doomed.access_key}/disable")
            assert disabled.status_code == 200
            cirrusmq_stack.advance_time(61)  # past every function's key cache
            send_one(cirrusmq_stack, topic)
            with pytest.raises(ConnectionClosed):
                frame = socket.recv(timeout=60)
                pytest.fail(f"a connection of a disabled key was told: {frame}")
    assert eventually(lambda: stored_waiters(cirrusmq_stack, topic) == [])


def test_waits_over_a_connections_cap_are_refused_and_store_nothing(cirrusmq_stack):
    """A prefix grant lets a key name topics that do not exist: a connection registers at
    most 1,000 (group, topic) pairs; one more is refused with TooManyWaits."""
    prefix = f"cap-{uuid.uuid4().hex[:8]}"
    with signed_client(cirrusmq_stack) as admin:
        key = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": [f"{prefix}-*"]}]})
    url = cirrusmq_stack.ws_endpoint
    replies = []
    with connect(url, additional_headers=signed_headers(key), open_timeout=10) as socket:
        for frame in range(10):
            topics = [f"{prefix}-{frame}-{i}" for i in range(100)]
            socket.send(json.dumps({"action": "wait", "group": "rv-g", "topics": topics}))
            replies.append(json.loads(socket.recv(timeout=60)))
        socket.send(json.dumps({"action": "wait", "group": "rv-g", "topics": [f"{prefix}-x"]}))
        over = json.loads(socket.recv(timeout=60))
    assert [r["type"] for r in replies] == ["waiting"] * 10
    assert (over["type"], over["code"]) == ("error", "TooManyWaits")
    assert stored_waiters(cirrusmq_stack, f"{prefix}-x") == []


def test_a_wait_sent_after_its_key_was_disabled_is_refused_and_closes_the_connection(
    cirrusmq_stack, topic
):
    """The keepalive of a connection whose key was disabled since: refused, and the
    connection is closed (it could do nothing else), not left open until API Gateway's
    two hours."""
    with signed_client(cirrusmq_stack) as admin:
        doomed = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["ws-*"]}]})
        url = cirrusmq_stack.ws_endpoint
        wait = json.dumps({"action": "wait", "group": "rv-g", "topics": [topic]})
        with connect(url, additional_headers=signed_headers(doomed), open_timeout=10) as socket:
            socket.send(wait)
            assert json.loads(socket.recv(timeout=30))["type"] == "waiting"
            assert admin.post(f"/v1/keys/{doomed.access_key}/disable").status_code == 200
            cirrusmq_stack.advance_time(61)  # past every function's key cache
            socket.send(wait)
            with pytest.raises(ConnectionClosed):
                while True:  # an error frame may come first; then the connection closes
                    frame = json.loads(socket.recv(timeout=60))
                    assert frame.get("code") == "InvalidSignature", frame
