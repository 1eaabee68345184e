"""A producer process for test_offline.py (run as a script, killed with SIGKILL).

``--mode offline``: the service is unreachable; send ``--count`` messages (``send``,
``send_batch`` and ``send_async``), check they are all parked in the outbox, print PARKED and
wait to be killed. ``--mode resume``: a new producer on the same outbox; it resends what the
killed one left, then sends ``--count`` more, and prints DONE. Credentials come from
``CIRRUSMQ_ACCESS_KEY`` / ``CIRRUSMQ_SECRET_KEY``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from cirrusmq import Credentials, Message, Producer


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--endpoint", "--outbox", "--topic", "--mode"):
        parser.add_argument(option, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--groups", type=int, default=10)
    args = parser.parse_args()

    credentials = Credentials(os.environ["CIRRUSMQ_ACCESS_KEY"], os.environ["CIRRUSMQ_SECRET_KEY"])
    producer = Producer(args.endpoint, credentials, outbox_path=args.outbox, max_attempts=2)
    producer.outbox_retry_max_s = 0.5
    producer.start()
    messages = [
        Message(
            args.topic,
            json.dumps({"group": f"g{i % args.groups}", "seq": i}),
            message_group=f"g{i % args.groups}",
        )
        for i in range(args.start, args.start + args.count)
    ]
    if args.mode == "offline":
        receipts = [producer.send(m) for m in messages[:20]]
        receipts += producer.send_batch(messages[20:300])
        assert all(r.pending and r.offset is None for r in receipts), receipts
        futures = [producer.send_async(m) for m in messages[300:]]
        producer.flush()
        assert not any(f.done() for f in futures)
        print("PARKED", producer.producer_id, flush=True)
        time.sleep(3600)  # killed here
    else:
        futures = [producer.send_async(m) for m in messages]
        unsent = producer.close(timeout_s=60)
        assert not unsent and all(not f.result().pending for f in futures)
        print("DONE", flush=True)


if __name__ == "__main__":
    main()
