"""The soak's SQS side, through boto3 unmodified: a standard queue (batched sends, some with
DelaySeconds) and a FIFO queue (MessageGroupId, deduplication ids, resends within the
deduplication interval), each with a RedrivePolicy to a dead-letter queue whose letters are
received and counted.

SQS answers a delete with success whether or not the visibility timeout had passed, so a
delete counts as a sure ack only when it was answered before the timeout: the broker clock
read after the answer is before the deadline, and the local stack's clock did not jump while
the delete was under way (its offset from the wall clock did not change). Another delete may
or may not have taken effect: the message is settled by it unless it comes again."""

from __future__ import annotations

import json
import random
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from soak_ledger import Delivery, Ledger
from soak_run import Run, is_poison, poison, wait_for_room

REGION = "eu-west-3"
VISIBILITY_S = 60
LONGER_VISIBILITY_S = 120
MAX_RECEIVE_COUNT = 3
BATCH = 10
"""SQS's most entries per send and delete, and messages per receive."""
DEDUP_RESEND_WITHIN_MS = 120_000
"""FIFO resends of a deduplication id only this soon after its first send (the interval is 5
minutes of the broker's clock, which a local stack moves on fast)."""
DELETE_TRIES = 5
ERRORS = (ClientError, BotoCoreError)


def sqs_client(run: Run) -> Any:
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=run.endpoint,
        region_name=REGION,
        aws_access_key_id=run.credentials.access_key,
        aws_secret_access_key=run.credentials.secret_key,
        config=Config(retries={"max_attempts": 1}, read_timeout=30),
    )


def error_name(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code", "ClientError")
    return type(exc).__name__


class SqsDriver:
    """Queues ``s`` (standard) and ``q`` (FIFO), each consumed by its group ``sqs-<topic>``
    and dead-lettering into its own queue after :data:`MAX_RECEIVE_COUNT` receives."""

    protocol = "sqs"
    quiet_ms = (LONGER_VISIBILITY_S + 30 + 30) * 1000
    """Drained once this long passed without a delivery: the longest visibility timeout (and
    delay), the backoff before a last receive (30 s) and a margin."""

    def __init__(self, run: Run) -> None:
        self.run = run
        prefix = f"soak-{run.run_id}"
        self.names = {"s": f"{prefix}-s", "q": f"{prefix}-q.fifo"}
        self.dead_names = {"s": f"{prefix}-sdl", "q": f"{prefix}-qdl.fifo"}
        self.groups = {"s": f"sqs-{prefix}-s", "q": f"sqs-{prefix}-q_fifo"}
        self.ledger = Ledger(self.protocol, {g: frozenset(k) for k, g in self.groups.items()})
        self.urls: dict[str, str] = {}
        self.dead_urls: dict[str, str] = {}

    # -------------------------------------------------------------- setup
    def setup(self) -> None:
        sqs = sqs_client(self.run)
        for key, name in self.names.items():
            fifo = {"FifoQueue": "true"} if key == "q" else {}
            dead_url = sqs.create_queue(QueueName=self.dead_names[key], Attributes=fifo)["QueueUrl"]
            dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            policy = {"deadLetterTargetArn": dead_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
            attributes = {
                **fifo,
                "RedrivePolicy": json.dumps(policy),
                "VisibilityTimeout": str(VISIBILITY_S),
            }
            self.urls[key] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            self.dead_urls[key] = dead_url
        sqs.close()

    def producers(self) -> list[Callable[[], None]]:
        return [self.produce_standard, self.produce_fifo]

    def consumers(self) -> list[Callable[[], None]]:
        return [partial(self.consume, "s"), partial(self.consume, "q")]

    # -------------------------------------------------------------- producers
    def produce_standard(self) -> None:
        rng = random.Random(7)
        run, ledger, url = self.run, self.ledger, self.urls["s"]
        sqs = sqs_client(run)
        k = 0
        while wait_for_room(run, ledger):
            count = run.take(BATCH)
            if not count:
                break
            entries, delays = [], {}
            for i in range(count):
                k += 1
                entry = {"Id": str(i), "MessageBody": f"sqs-{k}" + poison(rng)}
                if rng.random() < 0.2:
                    delays[str(i)] = entry["DelaySeconds"] = rng.choice((10, 30, 60))
                entries.append(entry)
            before = run.now_ms()
            try:
                answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
            except ERRORS as exc:
                ledger.count(f"send: {error_name(exc)}")
                ledger.record_uncertain(*(e["MessageBody"] for e in entries))
                continue
            for ok in answer.get("Successful", []):
                delay = delays.get(ok["Id"], 0)
                ledger.record_sent(ok["MessageId"], "s", before + delay * 1000 if delay else 0)
            for failed in answer.get("Failed", []):
                ledger.count(f"send failed: {failed.get('Code')}")
                ledger.record_uncertain(entries[int(failed["Id"])]["MessageBody"])
        sqs.close()

    def produce_fifo(self) -> None:
        """Batches of new messages, each with a resend of an earlier entry (same
        deduplication id and body) that must answer the first send's message id."""
        rng = random.Random(8)
        run, ledger, url = self.run, self.ledger, self.urls["q"]
        sqs = sqs_client(run)
        recent: deque[tuple[dict[str, str], str, int]] = deque(maxlen=50)
        """(entry, message id, broker time before its send) of recent first sends."""
        k = 0
        while wait_for_room(run, ledger):
            count = run.take(BATCH - 1)
            if not count:
                break
            entries = []
            for i in range(count):
                k += 1
                entries.append(
                    {
                        "Id": str(i),
                        "MessageBody": f"fifo-{k}" + poison(rng),
                        "MessageGroupId": f"g{k % 8}",
                        "MessageDeduplicationId": f"d-{k}",
                    }
                )
            before = run.now_ms()
            while recent and before - recent[0][2] > DEDUP_RESEND_WITHIN_MS:
                recent.popleft()
            resend = rng.choice(recent) if recent else None
            if resend is not None:
                entries.append({**resend[0], "Id": "resend"})
            answer = self.send_fifo(sqs, url, entries)
            if answer is None:
                ledger.record_uncertain(*(e["MessageBody"] for e in entries))
                continue
            for ok in answer.get("Successful", []):
                if ok["Id"] == "resend":
                    assert resend is not None
                    if ok["MessageId"] != resend[1]:
                        with ledger.lock:
                            ledger.dedup_broken.append(
                                f"{resend[0]['MessageDeduplicationId']}: first {resend[1]}, "
                                f"resent {ok['MessageId']}"
                            )
                    ledger.count("deduplicated resends")
                    continue
                entry = entries[int(ok["Id"])]
                ledger.record_sent(ok["MessageId"], "q")
                recent.append(({**entry}, ok["MessageId"], before))
            for failed in answer.get("Failed", []):
                ledger.count(f"send failed: {failed.get('Code')}")
                if failed["Id"] != "resend":
                    ledger.record_uncertain(entries[int(failed["Id"])]["MessageBody"])
        sqs.close()

    def send_fifo(self, sqs: Any, url: str, entries: list[dict[str, str]]) -> dict | None:
        """Send, and on an error send the same entries again: their deduplication ids make
        the retry store nothing twice."""
        for _ in range(3):
            try:
                return sqs.send_message_batch(QueueUrl=url, Entries=entries)
            except ERRORS as exc:
                self.ledger.count(f"send: {error_name(exc)}")
                time.sleep(0.5)
        return None

    # -------------------------------------------------------------- consumers
    def consume(self, key: str) -> None:
        rng = random.Random(f"sqs-{key}")
        run, ledger = self.run, self.ledger
        group, url, fifo = self.groups[key], self.urls[key], key == "q"
        sqs = sqs_client(run)
        polls = 0
        while not run.stop_all.is_set():
            polls += 1
            if polls % 8 == 0:
                self.receive_dead(sqs, key)
            before = run.now_ms()
            try:
                answer = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=BATCH,
                    VisibilityTimeout=VISIBILITY_S,
                    WaitTimeSeconds=1,
                    MessageSystemAttributeNames=["All"],
                )
            except ERRORS as exc:
                ledger.count(f"receive: {error_name(exc)}")
                time.sleep(0.2)
                continue
            after = run.now_ms()
            got = answer.get("Messages", [])
            ledger.count(f"receives {key}")
            ledger.count(f"received {key}", len(got))
            deadline = before + VISIBILITY_S * 1000
            draining = run.draining.is_set()
            deletes: list[tuple[dict, int]] = []
            longer: list[dict] = []
            given_back: list[dict] = []
            for message in got:
                self.record(group, message, after)
                roll = rng.random()
                if is_poison(message["Body"]):  # given back until it is a dead letter
                    given_back.append(message)
                elif draining or roll < 0.85:
                    deletes.append((message, deadline))
                elif roll < 0.9:
                    longer.append(message)
                else:
                    ledger.count("left to expire")
            if given_back:  # FIFO: at once (0 s); standard: the shortest, 10 s
                self.change_visibility(sqs, key, given_back, 0 if fifo else 10)
            if longer:
                changed_before = run.now_ms()
                for message in self.change_visibility(sqs, key, longer, LONGER_VISIBILITY_S):
                    deletes.append((message, changed_before + LONGER_VISIBILITY_S * 1000))
            if deletes:
                self.delete(sqs, key, deletes)
        self.receive_dead(sqs, key)
        sqs.close()

    def change_visibility(self, sqs: Any, key: str, messages: list[dict], seconds: int) -> list:
        """Change the messages' visibility; those it answered success for."""
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": seconds}
            for i, m in enumerate(messages)
        ]
        try:
            answer = sqs.change_message_visibility_batch(QueueUrl=self.urls[key], Entries=entries)
        except ERRORS as exc:
            self.ledger.count(f"visibility: {error_name(exc)}")
            return []
        for failed in answer.get("Failed", []):
            self.ledger.count(f"visibility failed: {failed.get('Code')}")
        self.ledger.count(f"visibility {seconds} s", len(answer.get("Successful", [])))
        return [messages[int(ok["Id"])] for ok in answer.get("Successful", [])]

    def delete(self, sqs: Any, key: str, deletes: list[tuple[dict, int]]) -> None:
        """Delete, again after an error (its outcome unknown); a delete answered before the
        message's visibility deadline is a sure ack."""
        group, run = self.groups[key], self.run
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, (m, _) in enumerate(deletes)
        ]
        for _ in range(DELETE_TRIES):
            offset = run.clock_offset_ms()
            try:
                answer = sqs.delete_message_batch(QueueUrl=self.urls[key], Entries=entries)
            except ERRORS as exc:
                self.ledger.count(f"delete: {error_name(exc)}")
                answer = None
            answered_at = run.now_ms()
            steady = run.clock_offset_ms() == offset
            if answer is None:
                time.sleep(0.5)
                continue
            for ok in answer.get("Successful", []):
                message, deadline = deletes[int(ok["Id"])]
                attempt = int(message["Attributes"]["ApproximateReceiveCount"])
                sure = steady and answered_at < deadline
                self.ledger.record_ack(group, message["MessageId"], attempt, sure=sure)
                if answered_at >= deadline:
                    self.ledger.count("deletes after the visibility timeout")
                elif not sure:
                    self.ledger.count("deletes while the clock moved")
            for failed in answer.get("Failed", []):
                self.ledger.count(f"delete failed: {failed.get('Code')}")
            return

    def record(self, group: str, message: dict, after: int) -> None:
        attributes = message.get("Attributes", {})
        self.ledger.record_delivery(
            Delivery(
                group,
                message["MessageId"],
                message["Body"],
                int(attributes.get("ApproximateReceiveCount", 0)),
                after,
                int(attributes["ApproximateFirstReceiveTimestamp"])
                if "ApproximateFirstReceiveTimestamp" in attributes
                else None,
            )
        )

    def settled(self) -> bool:
        return True

    # -------------------------------------------------------------- dead letters
    def receive_dead(self, sqs: Any, key: str) -> int:
        """Receive (and delete) what the dead-letter queue holds; how many letters."""
        try:
            answer = sqs.receive_message(
                QueueUrl=self.dead_urls[key], MaxNumberOfMessages=BATCH, WaitTimeSeconds=0
            )
        except ERRORS as exc:
            self.ledger.count(f"receive dead letters: {error_name(exc)}")
            return 0
        letters = answer.get("Messages", [])
        for letter in letters:
            self.ledger.record_dead(self.groups[key], letter["MessageId"], letter["Body"])
        if letters:
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(letters)
            ]
            try:
                sqs.delete_message_batch(QueueUrl=self.dead_urls[key], Entries=entries)
            except ERRORS as exc:
                self.ledger.count(f"delete dead letters: {error_name(exc)}")
        return len(letters)

    def collect_dead(self) -> None:
        sqs = sqs_client(self.run)
        for key in self.names:
            empty = 0
            while empty < 2:
                empty = 0 if self.receive_dead(sqs, key) else empty + 1
        sqs.close()
