"""How long does a `cirrusmq dev --data-dir` restart take, and how much disk does it use?

    .venv/bin/python tests/benchmarks/dev_restart.py [--batches 20] [--batch 100]

A LocalStack on a fresh data dir (no schedules, no expiry timer): a topic, ``--batches``
sends of ``--batch`` 1 KiB messages (one request each), a receive + ack of everything; then
stop and start again three times, printing each start's seconds and the data dir's bytes
(journal, snapshot) before and after it: the first restart replays the journal, later ones
load the snapshot written then. ``--ephemeral``: no data dir, no restarts (for comparison).
"""

from __future__ import annotations

import argparse
import base64
import os
import tempfile
import time
from pathlib import Path

from cirrusmq import Admin, Message, Producer, SimpleConsumer
from cirrusmq.testing import LocalStack


def usage(directory: Path) -> str:
    files = {p.name: p.stat().st_size for p in (directory / "moto").iterdir() if p.is_file()}
    return ", ".join(
        f"{name} {size / 2**20:.1f} MiB" for name, size in sorted(files.items()) if size
    )


def _body() -> str:
    return base64.b64encode(os.urandom(768)).decode()  # 1 KiB of incompressible-ish text


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument(
        "--ephemeral", action="store_true", help="No data dir: the sends' time for comparison."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data"
        started = time.monotonic()
        stack = LocalStack(
            schedules=False, expire_interval=None, data_dir=None if args.ephemeral else data
        ).start()
        print(f"first start (empty dir): {time.monotonic() - started:.1f} s")
        with Admin(stack.endpoint, stack.credentials) as admin:
            admin.create_topic("bench", queues=4)
        started = time.monotonic()
        with Producer(stack.endpoint, stack.credentials) as producer:
            for _ in range(args.batches):
                producer.send_batch([Message("bench", _body()) for _ in range(args.batch)])
        sent_s = time.monotonic() - started
        acked = 0
        with SimpleConsumer(
            stack.endpoint, stack.credentials, "g", ["bench"], await_duration=0
        ) as consumer:
            while got := consumer.receive(1000, 60):
                consumer.ack_batch(got)
                acked += len(got)
        total = args.batches * args.batch
        print(f"sent {total} messages in {args.batches} requests ({sent_s:.1f} s), acked {acked}")
        stack.stop()
        if args.ephemeral:
            return
        for restart in range(1, 4):
            print(f"restart {restart}: before: {usage(data)}", end="; ")
            started = time.monotonic()
            stack = LocalStack(schedules=False, expire_interval=None, data_dir=data).start()
            print(f"start {time.monotonic() - started:.1f} s; after: {usage(data)}")
            stack.stop()


if __name__ == "__main__":
    main()
