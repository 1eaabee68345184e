"""Idle consumer benchmark: what an idle PushConsumer costs a month on the notification
channel, and how fast it wakes.

    python tests/benchmarks/idle_consumer.py --seconds 60 [--rounds 5] [--fanout 1000]

A ``LocalStack`` (no schedules: only the consumer's own calls are counted), one PushConsumer
idle for ``--seconds``. The safety poll and the keepalive (9 minutes each in the SDK) are cut
to ``--cycle`` seconds for the run so that several of their cycles happen in it; what one
cycle costs (its receive and its ``wait`` message, with every AWS call and Lambda run they
make, counted) is then priced at the SDK's real intervals: 30 days / 540 s cycles, one
connection open the whole month, a reconnect every 110 minutes (the connect's calls, counted
at the start). Then ``--rounds`` times: the consumer waits on the channel, a message is
sent, and the time from the send to the listener is taken (wake-up).

The fan-out: ``--fanout`` WebSocket connections (asyncio clients, one process) wait on one
group and topic; one message is sent; the notifier's calls are counted and the time until
the last connection has its "look now" is taken. Each of those consumers would then receive
once (priced as the single consumer's receive).

List prices, us-east-1, checked on 2026-11-26 (aws.amazon.com/api-gateway/pricing,
/lambda/pricing, /dynamodb/pricing/on-demand): API Gateway WebSocket $1.00 per million
messages (32 KB units) and $0.25 per million connection minutes; HTTP API $1.00 per million
requests; Lambda $0.20 per million requests and $0.0000133334 per GB-second (arm64), billed
duration from the in-process run time; DynamoDB on-demand $0.625 per million write units and
$0.125 per million read units (1 per call: every item here is small).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from at_rest import GB_S, LAMBDA_REQUEST, Meter, request_cost  # noqa: E402
from cirrusmq import Admin, ConsumeResult, Message, Producer, PushConsumer  # noqa: E402
from cirrusmq.consumer import channel as channel_module  # noqa: E402
from cirrusmq.credentials import Credentials  # noqa: E402
from cirrusmq.signing import sign  # noqa: E402
from cirrusmq.testing import LocalStack  # noqa: E402
from cirrusmq_broker import clock  # noqa: E402

CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
PRICES_DATE = "2026-11-26"
WS_MESSAGE, WS_MINUTE, HTTP_REQUEST = 1.00e-6, 0.25e-6, 1.00e-6
MONTH_S = 30 * 24 * 3600
HTTP_FUNCTIONS = ("AdminFunction", "ProduceFunction", "ConsumeFunction")


class Snapshot:
    """Counters at one moment: the meter's calls and runs, the gateway's frames."""

    def __init__(self, meter: Meter, stack: LocalStack) -> None:
        self.calls = dict(meter.calls)
        self.invocations = dict(meter.invocations)
        self.seconds = dict(meter.seconds)
        self.memory = dict(meter.memory_mb)
        gateway = stack.websocket
        assert gateway is not None
        self.frames = gateway.frames_in + gateway.frames_out

    def cost_since(
        self, before: Snapshot, only: str | None = None
    ) -> tuple[float, dict[str, float]]:
        """$ of what happened between ``before`` and this snapshot, with its parts
        (``only``: that function's runs and calls, and the frames)."""
        parts = {"DynamoDB": 0.0, "Lambda": 0.0, "HTTP API": 0.0, "WebSocket messages": 0.0}
        for key, n in self.calls.items():
            if only is None or key[0] == only:
                parts["DynamoDB"] += request_cost(key[1], n - before.calls.get(key, 0))
        for function, n in self.invocations.items():
            if only is not None and function != only:
                continue
            runs = n - before.invocations.get(function, 0)
            seconds = self.seconds[function] - before.seconds.get(function, 0.0)
            gb = self.memory.get(function, 1024) / 1024
            parts["Lambda"] += runs * LAMBDA_REQUEST + seconds * gb * GB_S
            if function in HTTP_FUNCTIONS:
                parts["HTTP API"] += runs * HTTP_REQUEST
        if only in (None, "NotifyFunction"):
            parts["WebSocket messages"] = (self.frames - before.frames) * WS_MESSAGE
        return sum(parts.values()), parts


def eventually(predicate, timeout_s: float = 120) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def idle_consumer(args: argparse.Namespace, stack: LocalStack, topic: str) -> dict:
    meter = Meter()
    woke: list[float] = []
    received = threading.Event()

    def listener(_message) -> ConsumeResult:  # noqa: ANN001
        woke.append(time.monotonic())
        received.set()
        return ConsumeResult.SUCCESS

    channel_module.SAFETY_POLL_S = args.cycle
    channel_module.KEEPALIVE_S = args.cycle
    consumer = PushConsumer(
        stack.endpoint, CREDENTIALS, "idle", [topic], listener, heartbeat_interval_s=None
    )
    idle = consumer._idle
    try:
        start = Snapshot(meter, stack)
        consumer.start()
        assert eventually(lambda: idle.waiter is not None and idle.waiter.registered)
        connected = Snapshot(meter, stack)  # health, first receives, connect, first wait
        waits = idle.channel_waits
        steady = Snapshot(meter, stack)
        started = time.monotonic()
        time.sleep(args.seconds)
        cycles = idle.channel_waits - waits
        end = Snapshot(meter, stack)
        elapsed = time.monotonic() - started
        cycle_cost, parts = end.cost_since(steady)
        # a reconnect: the $connect and wait runs and frames, and the two receives that
        # follow (every waiter polls once when the channel drops, once after registering)
        notify_cost, _ = connected.cost_since(start, only="NotifyFunction")
        receive_total, _ = end.cost_since(steady, only="ConsumeFunction")
        receive_cost = receive_total / max(1, cycles)
        connect_cost = notify_cost + 2 * receive_cost
        per_cycle = cycle_cost / max(1, cycles)
        latencies = []
        with Producer(stack.endpoint, CREDENTIALS) as producer:
            for _ in range(args.rounds):
                received.clear()
                waits = idle.channel_waits
                assert eventually(lambda w=waits: idle.channel_waits > w or _waiting(idle))
                assert eventually(lambda: _waiting(idle))
                time.sleep(0.2)  # settled in its channel wait
                sent = time.monotonic()
                producer.send(Message(topic, body=b"wake up"))
                assert received.wait(60), "the consumer did not wake"
                latencies.append((woke[-1] - sent) * 1000)
    finally:
        consumer.shutdown(10)
        meter.close()
    month_cycles = MONTH_S / 540.0
    reconnects = MONTH_S / channel_module.RECONNECT_AFTER_S
    minutes = MONTH_S / 60
    monthly = per_cycle * month_cycles + minutes * WS_MINUTE + reconnects * connect_cost
    return {
        "monthly": monthly,
        "per_cycle": per_cycle,
        "parts": parts,
        "cycles": cycles,
        "elapsed": elapsed,
        "connect": connect_cost,
        "connection_minutes": minutes * WS_MINUTE,
        "latencies": latencies,
        "receive_cost": receive_cost,
    }


def _waiting(idle) -> bool:  # noqa: ANN001
    return idle.waiter is not None and idle.waiter.registered


async def _fan_out(stack: LocalStack, topic: str, n: int, meter: Meter) -> tuple[float, Snapshot]:
    from websockets.asyncio.client import connect

    url = stack.ws_endpoint
    told: list[float] = []
    all_told = asyncio.Event()
    sockets = []

    async def open_one() -> None:
        now = clock.now_ms() / 1000
        headers = sign("GET", "http://channel/v1/notifications", b"", CREDENTIALS, now=now)
        socket = await connect(url, additional_headers=headers, ping_interval=None)
        await socket.send(json.dumps({"action": "wait", "group": "fan", "topics": [topic]}))
        assert json.loads(await socket.recv())["type"] == "waiting"
        sockets.append(socket)

    for start in range(0, n, 50):
        await asyncio.gather(*(open_one() for _ in range(min(50, n - start))))

    async def listen(socket) -> None:  # noqa: ANN001
        await socket.recv()
        told.append(time.monotonic())
        if len(told) == n:
            all_told.set()

    listeners = [asyncio.create_task(listen(s)) for s in sockets]
    before = Snapshot(meter, stack)
    with Producer(stack.endpoint, CREDENTIALS) as producer:
        sent = time.monotonic()
        await asyncio.to_thread(producer.send, Message(topic, body=b"fan out"))
    await asyncio.wait_for(all_told.wait(), 600)
    await asyncio.gather(*listeners)
    for socket in sockets:
        await socket.close()
    return (max(told) - sent) * 1000, before


def fan_out(args: argparse.Namespace, stack: LocalStack, topic: str) -> dict:
    meter = Meter()
    try:
        last_ms, before = asyncio.run(_fan_out(stack, topic, args.fanout, meter))
        after = Snapshot(meter, stack)
    finally:
        meter.close()
    cost, parts = after.cost_since(before)
    return {"cost": cost, "parts": parts, "last_ms": last_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="idle seconds measured")
    parser.add_argument("--cycle", type=float, default=10, help="safety poll in the run (s)")
    parser.add_argument("--rounds", type=int, default=5, help="wake-ups measured")
    parser.add_argument("--fanout", type=int, default=1000, help="connections told at once")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    with LocalStack(schedules=False, credentials=CREDENTIALS, preload_handlers=True) as stack:
        topic = f"idle-{uuid.uuid4().hex[:8]}"
        with Admin(stack.endpoint, CREDENTIALS) as admin:
            admin.create_topic(topic, queues=4)
        one = idle_consumer(args, stack, topic)
        fan = fan_out(args, stack, topic) if args.fanout else None
    lat = one["latencies"]
    p50, worst = statistics.median(lat), max(lat)
    print(f"idle consumer benchmark, list prices of {PRICES_DATE} (us-east-1)")
    print(
        f"  run: {one['elapsed']:.0f} s idle, {one['cycles']} safety-poll cycles of "
        f"{args.cycle:g} s (priced at 540 s: {MONTH_S / 540:.0f} a month)"
    )
    parts = ", ".join(f"{k} ${v / max(1, one['cycles']):.8f}" for k, v in one["parts"].items())
    print(f"  one cycle (a receive + a wait message): ${one['per_cycle']:.8f} ({parts})")
    print(f"  connection minutes: ${one['connection_minutes']:.4f} a month")
    print(f"  a (re)connect: ${one['connect']:.8f}, every 110 min")
    print(f"  wake-ups (send -> listener, ms): {', '.join(f'{x:.0f}' for x in lat)}")
    if fan is not None:
        n = args.fanout
        receives = n * one["receive_cost"]
        parts = ", ".join(f"{k} ${v:.6f}" for k, v in fan["parts"].items())
        print(
            f"  one notification fan-out to {n:,} connections: ${fan['cost']:.6f} ({parts}); "
            f"with their {n:,} receives ${fan['cost'] + receives:.6f}; last told after "
            f"{fan['last_ms']:.0f} ms"
        )
        print(
            f"{n:,} idle consumers (one group, one topic, a connection each): "
            f"${one['monthly'] * n:.2f} per month, wake-up of the last one ~"
            f"{fan['last_ms'] + p50:.0f} ms"
        )
    cost = one["monthly"]
    print(f"idle consumer: ${cost:.3f} per month, wake-up p50 {p50:.0f} ms, max {worst:.0f} ms")
    if args.json:
        data = {
            "prices": PRICES_DATE,
            "consumer_month": cost,
            "connection_minutes_month": one["connection_minutes"],
            "wake_up_p50_ms": p50,
            "wake_up_max_ms": worst,
            "fanout": args.fanout if fan is not None else 0,
            "fanout_last_told_ms": fan["last_ms"] if fan is not None else None,
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
