"""A broadcast consumer process for test_pull_broadcast.py (run as a script, killed with
SIGKILL): appends each message's text to ``--log`` (flushed, fsynced) and sleeps a moment per
message, so the kill lands in the middle of a batch. Credentials come from
``CIRRUSMQ_ACCESS_KEY`` / ``CIRRUSMQ_SECRET_KEY``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from cirrusmq import BroadcastConsumer, ConsumeResult, Credentials, MessageView


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--endpoint", "--topic", "--group", "--store", "--log"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    credentials = Credentials(os.environ["CIRRUSMQ_ACCESS_KEY"], os.environ["CIRRUSMQ_SECRET_KEY"])

    def listener(message: MessageView) -> ConsumeResult:
        with open(args.log, "a") as log:
            log.write(message.text + "\n")
            log.flush()
            os.fsync(log.fileno())
        time.sleep(0.05)
        return ConsumeResult.SUCCESS

    BroadcastConsumer(
        args.endpoint,
        credentials,
        args.group,
        [args.topic],
        listener,
        instance_id="worker",
        offset_store_path=args.store,
        consume_from="earliest",
        max_poll_messages=5,
        max_poll_interval_s=0.2,
    ).start()
    threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
