"""Large-message benchmark: one big body there and back, its time, the SDK's memory, its calls.

    python tests/benchmarks/large_message.py [--megabytes 100] [--rounds 1]

A ``LocalStack`` (moto serves S3); the SDK runs in a child process so that its memory is
its own: the child writes a file of ``--megabytes`` MB, warms up (imports, one small large
message), then sends the file with a ``Producer`` (the body is uploaded part by part with
presigned URLs), receives it with a ``SimpleConsumer`` and reads it with ``body_stream()``
checking its SHA-256. It reports the wall time of the send and of the read and its peak RSS
growth over the warmed-up process (``resource.getrusage``, a high-water mark) and the peak of
its Python allocations during the round trip (``tracemalloc``). The parent
counts the service's own S3 calls (``observe_calls``; a batch object's PUT and GET are the
ones any message costs) and the child its S3 requests, both after the warm-up.

The cost per message is those requests at S3 Standard list prices (us-east-1, the figures
docs/deploy.md uses, read 2026-11-26): PUT/POST/LIST $0.005 per 1,000, GET/HEAD $0.0004 per
1,000; data moved inside the region is free; storage $0.023 per GB-month.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

MIB = 1024 * 1024
S3_PUT, S3_GET, GB_MONTH = 0.005e-3, 0.0004e-3, 0.023
PUT_CLASS = {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "PutObject"}


def child(endpoint: str, access_key: str, secret_key: str, topic: str, megabytes: int) -> dict:
    """The SDK's side, in its own process."""
    import httpx
    from cirrusmq import Credentials, Message, Producer, SimpleConsumer

    credentials = Credentials(access_key, secret_key)
    s3_requests: collections.Counter[str] = collections.Counter()

    def count(request: httpx.Request) -> None:
        if "X-Amz-Signature" in str(request.url):
            query = request.url.params
            kind = (
                "UploadPart"
                if "partNumber" in query
                else "CompleteMultipartUpload"
                if request.method == "POST"
                else "AbortMultipartUpload"
                if request.method == "DELETE"
                else "GetObject"
            )
            s3_requests[kind] += 1

    original_init = httpx.Client.__init__

    def counting_init(self, *args, **kwargs) -> None:  # noqa: ANN001
        hooks = kwargs.setdefault("event_hooks", {})
        hooks.setdefault("request", []).append(count)
        original_init(self, *args, **kwargs)

    httpx.Client.__init__ = counting_init  # type: ignore[method-assign]
    size = megabytes * 1000 * 1000
    path = os.path.join(tempfile.mkdtemp(), "body.bin")
    digest, block = hashlib.sha256(), os.urandom(MIB)
    with open(path, "wb") as out:
        for offset in range(0, size, MIB):
            chunk = block[: min(MIB, size - offset)]
            digest.update(chunk)
            out.write(chunk)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Producer(endpoint, credentials, large_body_threshold_bytes=0) as producer:
        producer.send(Message(topic, b"warm-up"))
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as consumer:
        (warm,) = consumer.receive(1, 60)
        assert warm.body == b"warm-up"
        consumer.ack(warm)
    print("warm", flush=True)  # the parent counts the service's calls from here on
    sys.stdin.readline()
    s3_requests.clear()
    baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started = time.perf_counter()
    with Producer(endpoint, credentials) as producer:
        producer.send(Message(topic, Path(path)))
    sent = time.perf_counter()
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as consumer:
        (message,) = consumer.receive(1, 60)
        received = time.perf_counter()
        check, read = hashlib.sha256(), 0
        with message.body_stream() as stream:
            for chunk in stream:
                check.update(chunk)
                read += len(chunk)
        consumer.ack(message)
    done = time.perf_counter()
    assert (read, check.hexdigest()) == (size, digest.hexdigest()), "the body came back changed"
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    os.remove(path)
    return {
        "bytes": size,
        "send_s": sent - started,
        "receive_s": received - sent,
        "read_s": done - received,
        "total_s": done - started,
        "baseline_rss_mib": baseline_kib / 1024,
        "peak_rss_growth_mib": (peak_kib - baseline_kib) / 1024,
        "python_peak_mib": traced_peak / MIB,
        "s3_requests": dict(s3_requests),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    from cirrusmq import Admin
    from cirrusmq.credentials import Credentials
    from cirrusmq.testing import LocalStack
    from cirrusmq_broker.storage.clients import observe_calls

    credentials = Credentials("local-admin", secrets.token_urlsafe(30))
    service_calls: collections.Counter[str] = collections.Counter()

    def observe(service: str, operation: str, params: dict) -> None:
        if service == "s3":
            service_calls[operation] += 1

    with LocalStack(schedules=False, credentials=credentials, expire_interval=None) as stack:
        with Admin(stack.endpoint, credentials) as admin:
            topic = f"big-{uuid.uuid4().hex[:8]}"
            admin.create_topic(topic)
        remove = observe_calls(observe)
        try:
            for round_ in range(1, args.rounds + 1):
                with subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        stack.endpoint,
                        credentials.access_key,
                        credentials.secret_key,
                        topic,
                        str(args.megabytes),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                ) as sdk:
                    assert sdk.stdin is not None and sdk.stdout is not None
                    assert sdk.stdout.readline().strip() == "warm"
                    service_calls.clear()
                    sdk.stdin.write("go\n")
                    sdk.stdin.flush()
                    output = sdk.stdout.read()
                if sdk.returncode != 0:
                    raise SystemExit(f"the SDK's process failed ({sdk.returncode})")
                report(round_, json.loads(output.splitlines()[-1]), dict(service_calls))
        finally:
            remove()


def report(round_: int, result: dict, service_calls: dict) -> None:
    megabytes = result["bytes"] / 1e6
    print(f"round {round_}: a {megabytes:.0f} MB body there and back")
    print(
        f"  send (upload + send) {result['send_s']:.2f} s, receive {result['receive_s']:.2f} s,"
        f" streamed read with SHA-256 check {result['read_s']:.2f} s;"
        f" total {result['total_s']:.2f} s ({megabytes / result['total_s']:.0f} MB/s)"
    )
    print(
        f"  SDK peak RSS growth {result['peak_rss_growth_mib']:.1f} MiB"
        f" (over a warmed-up process of {result['baseline_rss_mib']:.0f} MiB);"
        f" peak of Python allocations {result['python_peak_mib']:.1f} MiB (tracemalloc)"
    )
    calls = collections.Counter(result["s3_requests"])
    calls.update({f"{k} (service)": v for k, v in service_calls.items()})
    print("  S3 requests: " + ", ".join(f"{k} {v}" for k, v in sorted(calls.items())))
    puts = sum(v for k, v in calls.items() if k.split(" ")[0] in PUT_CLASS)
    gets = sum(calls.values()) - puts
    request_cost = puts * S3_PUT + gets * S3_GET
    storage = result["bytes"] / 1e9 * GB_MONTH * 14 / 30  # the body's 14-day tier
    print(
        f"  cost: {puts} PUT-class x $0.005/1,000 + {gets} GET-class x $0.0004/1,000 ="
        f" ${request_cost:.7f} per message, plus storage ${storage:.5f} (14 days)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(*sys.argv[2:6], int(sys.argv[6]))))
    else:
        main()
