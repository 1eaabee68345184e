"""Does a long `cirrusmq dev` session stay bounded? The moto child's memory over simulated days.

    .venv/bin/python tests/benchmarks/dev_memory.py [--hours 48] [--step-minutes 15]
        [--data-dir DIR]

A LocalStack with schedules on; every simulated ``--step-minutes``: ``--sends`` batches of
``--batch`` 1 KiB random messages to a topic kept 1 hour (index items expire after 1 h,
batch objects at the 1-day lifecycle tier, rounded up to midnight UTC), a receive + ack of
what arrived, then ``advance_time`` (TTL and lifecycle expiry, due schedules). Every 6
simulated hours a scratch topic is created, filled and deleted (the janitor purges it).
Prints, every simulated ``--report-hours``: the moto child's RSS and peak RSS, the bucket's
objects and bytes, and the log index's items. Bounded means: these level off once
retention turns over, instead of growing with the session.

``--data-dir DIR`` (an empty or absent folder): the stack keeps its data there, each report
adds the folder's journal and snapshot MiB, and at the end the stack is stopped and started
again on the same folder, printing the seconds until it answers and the folder after.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from cirrusmq.credentials import Credentials
from cirrusmq.signing import CirrusAuth
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock

CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
SIGNED = CirrusAuth(CREDENTIALS)


def rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def bucket_usage(s3, bucket: str) -> tuple[int, int]:
    count = size = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            count += 1
            size += item["Size"]
    return count, size


def table_items(dynamodb, table: str) -> int:
    return sum(
        page["Count"]
        for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT")
    )


def folder_mib(directory: Path | None) -> tuple[float, float]:
    """The data dir's journal and snapshot MiB (zeros without a data dir)."""
    if directory is None:
        return 0.0, 0.0
    moto = directory / "moto"
    sizes = [
        (moto / name).stat().st_size / 2**20 if (moto / name).exists() else 0.0
        for name in ("journal.bin", "snapshot.pickle")
    ]
    return sizes[0], sizes[1]


def sign_on_the_stack_clock() -> None:
    """Sign on the broker clock, which this process shares with every stack it runs (one
    advanced by another stack still running in it, or by ``advance_time`` here)."""
    SIGNED.clock_offset_s = clock.offset_ms() / 1000


def restart(directory: Path) -> None:
    """Start a stack on ``directory`` again; print the seconds until it answers."""
    journal, snapshot = folder_mib(directory)
    print(f"before restart: journal {journal:.1f} MiB, snapshot {snapshot:.1f} MiB")
    started = time.monotonic()
    with (
        LocalStack(expire_interval=None, data_dir=directory, credentials=CREDENTIALS) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
    ):
        sign_on_the_stack_clock()
        listed = api.get("/v1/topics")
        listed.raise_for_status()
        answered = time.monotonic() - started
        names = sorted(t["name"] for t in listed.json()["topics"])
        journal, snapshot = folder_mib(directory)
        print(f"topics kept: {', '.join(names)}")
        print(
            f"restart: {answered:.1f} s until the stack answered; after: "
            f"journal {journal:.1f} MiB, snapshot {snapshot:.1f} MiB",
            flush=True,
        )


def send(api: httpx.Client, topic: str, batch: int) -> None:
    messages = [{"body": base64.b64encode(os.urandom(1024)).decode()} for _ in range(batch)]
    api.post(f"/v1/topics/{topic}/messages", json={"messages": messages}).raise_for_status()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=48)
    parser.add_argument("--step-minutes", type=float, default=15)
    parser.add_argument("--sends", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--report-hours", type=float, default=4)
    parser.add_argument("--data-dir", type=Path, help="Keep the stack's data in this folder.")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with (
        LocalStack(expire_interval=None, data_dir=args.data_dir, credentials=CREDENTIALS) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
    ):
        sign_on_the_stack_clock()
        moto_pid = stack._moto.pid  # noqa: SLF001 - the child process measured here
        s3, dynamodb = stack.boto3_client("s3"), stack.boto3_client("dynamodb")
        bucket, index = stack.resources["MessageBucket"], stack.resources["LogIndexTable"]
        api.post(
            "/v1/topics", json={"name": "day", "queues": 4, "retention_hours": 1}
        ).raise_for_status()
        print(
            f"moto pid {moto_pid}; {args.hours:g} simulated hours, step {args.step_minutes:g} min"
        )
        print(
            f"{'sim h':>6} {'RSS MiB':>8} {'peak':>6} {'objects':>8} {'obj MiB':>8} "
            f"{'index':>6} {'jrnl MiB':>8} {'snap MiB':>8} {'wall s':>7}"
        )
        steps = int(args.hours * 60 / args.step_minutes)
        per_report = max(1, int(args.report_hours * 60 / args.step_minutes))
        for step in range(1, steps + 1):
            for _ in range(args.sends):
                send(api, "day", args.batch)
            received = api.post(
                "/v1/groups/g/receive",
                json={"topic": "day", "max_messages": 1000, "invisible_seconds": 60},
            ).json()["messages"]
            handles = [m["receipt_handle"] for m in received]
            if handles:
                api.post("/v1/groups/g/ack", json={"receipt_handles": handles})
            hour = step * args.step_minutes / 60
            if hour % 6 == 0:
                name = f"scratch-{step}"
                api.post("/v1/topics", json={"name": name, "queues": 2, "retention_hours": 1})
                for _ in range(args.sends):
                    send(api, name, args.batch)
                api.delete(f"/v1/topics/{name}")
            stack.advance_time(args.step_minutes * 60)
            sign_on_the_stack_clock()
            if step % per_report == 0 or step == steps:
                rss, peak = rss_mib(moto_pid)
                objects, size = bucket_usage(s3, bucket)
                items = table_items(dynamodb, index)
                journal, snapshot = folder_mib(args.data_dir)
                print(
                    f"{hour:6.0f} {rss:8.0f} {peak:6.0f} {objects:8d} {size / 2**20:8.1f} "
                    f"{items:6d} {journal:8.1f} {snapshot:8.1f} {time.monotonic() - started:7.0f}",
                    flush=True,
                )

    if args.data_dir is not None:
        restart(args.data_dir)


if __name__ == "__main__":
    main()
