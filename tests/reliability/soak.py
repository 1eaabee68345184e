"""Soak: every feature of three protocols and an exactly-once pipeline at once against a
running stack, over HTTP.

    .venv/bin/python tests/reliability/soak.py --seconds 90

Starts its own local stack on loopback (``cirrusmq.testing.LocalStack``) unless
``--endpoint`` is given (credentials from CIRRUSMQ_ACCESS_KEY / CIRRUSMQ_SECRET_KEY). For
``--seconds`` it runs four protocols, each with its own topics or queues (``soak_sdk.py``,
``soak_sqs.py``, ``soak_mqhttp.py``, ``soak_pipeline.py``):

- the CirrusMQ SDK: 3 batching producers (normal, delayed and FIFO messages) and a
  ``TransactionProducer`` (commits, rollbacks); 4 consumers in two groups whose acks ride on
  their next receive (nacks, messages left to expire, late acks, change of invisible duration);
- SQS through boto3: a standard queue (batched sends, DelaySeconds) and a FIFO queue
  (MessageGroupId, deduplicated resends), each with a RedrivePolicy to a dead-letter queue
  whose letters are received and counted; a consumer per queue (batched deletes, visibility
  changes, messages left to expire);
- RocketMQ HTTP through mq-http-sdk: a producer of normal and delayed messages
  (``__STARTDELIVERTIME``), a transactional producer (commit, rollback, back-checks answered
  through ``consume_half_message``), two consumers (one also serves the transactional topic);
- a pipeline (``soak_pipeline.py``): orders from a source producer through two stages of 2
  workers each, with exactly-once consume -> produce steps, to a FIFO topic and a sink, under
  worker crashes before and after commits, lost answers, leases outlived, fenced producers
  and broker crashes and throttles; judged from the topics' stored copies (lost, duplicated).

A few messages of each SDK and SQS producer are poison (never acked: they end dead letters).
On a local stack a clock thread moves the stack's time on (10 s every 2 s) so that leases
expire and delays and backoffs come due. Then it stops producing, drains every group (the
clock moves 30 s every second), receives or lists the dead letters and judges, per protocol and
in all. The last line is

    sent S, acked A, dead-lettered D, lost L, duplicate acks U, early E, rolled-back visible R, \
    N msg/s

counted per (group, message), N the messages sent per second of production; L, U, E and R
must be 0 (exit status 1 otherwise). Bounded: at most ``--max-messages`` sends in all, and
each protocol waits while ``--max-backlog`` of its (group, message) pairs are unsettled.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable

from cirrusmq import Credentials
from soak_ledger import Verdict
from soak_mqhttp import MqHttpDriver
from soak_pipeline import PipelineDriver
from soak_run import Run
from soak_sdk import SdkDriver
from soak_sqs import SqsDriver

PERIOD_S, STEP_S = 2.0, 10
DRAIN_PERIOD_S, DRAIN_STEP_S = 1.0, 30
PROTOCOLS = {
    "sdk": SdkDriver,
    "sqs": SqsDriver,
    "mqhttp": MqHttpDriver,
    "pipeline": PipelineDriver,
}


class Soak:
    def __init__(self, run: Run, protocols: list[str], seconds: float) -> None:
        self.run = run
        self.seconds = seconds
        self.drivers = [PROTOCOLS[p](run) for p in protocols]
        self.produced_s = 0.0
        self.drained_s = 0.0
        self.advances = 0
        self.drain_from_ms = 0
        self.quiet = False
        """Whether the drain ended because every protocol was quiet (not at its bound)."""

    def clock(self) -> None:
        """A local stack's time moves on: leases expire, delays and backoffs come due."""
        run = self.run
        while not run.stop_all.wait(DRAIN_PERIOD_S if run.draining.is_set() else PERIOD_S):
            step = DRAIN_STEP_S if run.draining.is_set() else STEP_S
            run.local.advance_time(step)
            self.advances += 1

    def drained(self) -> bool:
        """Every protocol's clock passed its quiet time since its last delivery (and since
        production ended), and none waits for anything else."""
        now = self.run.now_ms()
        return all(
            now - max(d.ledger.last_delivery_ms, self.drain_from_ms) > d.quiet_ms and d.settled()
            for d in self.drivers
        )

    def run_all(self) -> int:
        run = self.run
        for driver in self.drivers:
            driver.setup()
        producers = [self.thread(f) for d in self.drivers for f in d.producers()]
        consumers = [self.thread(f) for d in self.drivers for f in d.consumers()]
        if run.local is not None:
            consumers.append(self.thread(self.clock))
        started = time.monotonic()
        for t in producers + consumers:
            t.start()
        time.sleep(self.seconds)
        run.stop_producing.set()
        self.produced_s = time.monotonic() - started
        for t in producers:
            t.join(30)
        run.draining.set()
        self.drain_from_ms = run.now_ms()
        drain_started = time.monotonic()
        drain_until = drain_started + (max(300.0, 3 * self.seconds) if run.local else 1800.0)
        while time.monotonic() < drain_until and not self.drained():
            time.sleep(1.0)
        self.quiet = self.drained()
        run.stop_all.set()
        for t in producers + consumers:
            t.join(60)
        self.drained_s = time.monotonic() - drain_started
        for driver in self.drivers:
            driver.collect_dead()
        return self.judge()

    def thread(self, target: Callable[[], None]) -> threading.Thread:
        return threading.Thread(target=target, daemon=True)

    def judge(self) -> int:
        total = Verdict()
        lines = []
        for driver in self.drivers:
            verdict = driver.ledger.judge()
            counters = dict(sorted(driver.ledger.counters.items()))
            print(f"{driver.protocol}: {counters}")
            lines.append(f"{driver.protocol}: {verdict.line()}")
            total = total.add(verdict)
        for kind, items in sorted(total.examples.items()):
            print(f"{kind} ({len(items)}): {items[:20]}")
        print(
            f"run {self.run.run_id}: produced for {self.produced_s:.0f} s, "
            f"{'drained in' if self.quiet else 'NOT drained (stopped at its bound) after'} "
            f"{self.drained_s:.0f} s, clock moved {self.advances} times"
        )
        for line in lines:
            print(line)
        rate = total.sent / self.produced_s if self.produced_s else 0.0
        print(f"{total.line()}, {rate:.0f} msg/s")
        return 0 if total.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--endpoint", help="a running stack (default: start a local one)")
    parser.add_argument("--max-messages", type=int, default=50_000)
    parser.add_argument("--max-backlog", type=int, default=1500)
    parser.add_argument(
        "--protocols", default=",".join(PROTOCOLS), help="comma-separated: sdk,sqs,mqhttp,pipeline"
    )
    args = parser.parse_args(argv)
    protocols = [p for p in args.protocols.split(",") if p]
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown:
        parser.error(f"unknown protocols {sorted(unknown)}; known: {', '.join(PROTOCOLS)}")

    def soak(endpoint: str, credentials: Credentials, local: object | None) -> int:
        run = Run(
            endpoint,
            credentials,
            local,
            uuid.uuid4().hex[:6],
            args.max_messages,
            max_backlog=args.max_backlog,
        )
        return Soak(run, protocols, args.seconds).run_all()

    if args.endpoint:
        credentials = Credentials(
            os.environ["CIRRUSMQ_ACCESS_KEY"], os.environ["CIRRUSMQ_SECRET_KEY"]
        )
        return soak(args.endpoint, credentials, None)
    from cirrusmq.testing import LocalStack

    with LocalStack(host="127.0.0.1") as stack:
        return soak(stack.endpoint, stack.credentials, stack)


if __name__ == "__main__":
    sys.exit(main())
