"""Transactional messages: :class:`TransactionProducer`, its checker, and operators' tools.

::

    def checker(view):                       # asked when a verdict never arrived
        return TransactionResolution.COMMIT if paid(view.keys) else TransactionResolution.ROLLBACK

    with TransactionProducer(endpoint, credentials, producer_group="orders",
                             checker=checker) as producer:
        with producer.begin_transaction() as tx:
            tx.send(Message("payments", b"...", keys=("order-7",)))
            charge_card()                    # an exception here rolls the transaction back
        # a clean exit commits: the message becomes visible to consumers

Half messages are stored but invisible until the commit. If the verdict is lost (a crash,
a cut network), the service asks any live producer of the group (a background long poll:
no inbound connectivity needed), which calls ``checker`` and answers; after ``max_checks``
unanswered checks the transaction is rolled back. Each producer registers its
``transactional_id`` and gets an epoch: a newer registration with the same id fences this
one (:class:`~cirrusmq.errors.ProducerFencedError`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from typing import Any

from ..client_transport import client_transport
from ..credentials import Credentials
from ..errors import ClientClosedError, MQError, ProducerFencedError
from ..large_body import INLINE_MAX_BYTES, is_large, upload_body
from ..message import Message, MessageView, new_message_id
from ..transport import Transport
from ..wire import read_int, read_list, read_mapping, read_str
from .models import (
    Checker,
    TransactionChecker,
    TransactionMessageView,
    TransactionReceipt,
    TransactionResolution,
    group_path,
    now_ms,
    transaction_path,
)

__all__ = ["Transaction", "TransactionProducer"]

log = logging.getLogger("cirrusmq.transaction")

POLL_ERROR_PAUSE_S = 1.0


class Transaction:
    """One transaction: ``send`` half messages (to one topic), then ``commit`` or
    ``rollback``. As a context manager it commits on a clean exit and rolls back on an
    exception."""

    def __init__(self, producer: TransactionProducer, transaction_id: str) -> None:
        self.producer = producer
        self.id = transaction_id
        self._parts = 0
        self._unsettled: tuple[int, list[Message], list[dict[str, Any]]] | None = None
        """The last send whose outcome is unknown (it raised): sending the same messages
        again reuses its part number and message ids (stored once, not twice)."""
        self._lock = threading.Lock()
        self.state = "OPEN"
        """OPEN, COMMITTED or ROLLED_BACK (as this client last saw it)."""

    def send(self, message: Message) -> TransactionReceipt:
        """Store one half message (invisible until the commit)."""
        return self.send_batch([message])[0]

    def send_batch(self, messages: Sequence[Message]) -> list[TransactionReceipt]:
        """Store several half messages of one topic in one request."""
        if not messages:
            raise ValueError("send_batch needs at least one message")
        topics = {m.topic for m in messages}
        if len(topics) != 1:
            raise ValueError("the messages of one send go to one topic")
        with self._lock:
            if self.state != "OPEN":
                raise ClientClosedError(f"transaction {self.id} is {self.state}")
            if self._unsettled is not None and self._unsettled[1] == list(messages):
                part, _, wire = self._unsettled  # a retry of a send with a lost answer
            else:
                part, self._parts = self._parts, self._parts + 1
                born = now_ms()
                wire = [
                    (
                        self.producer._offloaded(m)
                        if is_large(m.body, INLINE_MAX_BYTES) and m.large_body is None
                        else m
                    ).to_wire(new_message_id(), born)
                    for m in messages
                ]
            self._unsettled = (part, list(messages), wire)
        try:
            receipts = self.producer._send(self, part, messages, wire)
        except ProducerFencedError:
            raise
        except MQError as exc:
            if not exc.retriable:  # refused: nothing stored, a retry is a new send
                with self._lock:
                    self._unsettled = None
            raise
        with self._lock:
            self._unsettled = None
        return receipts

    def commit(self) -> None:
        """Make the half messages visible (a no-op if committed before)."""
        self.producer._end(self.id, TransactionResolution.COMMIT)
        self.state = "COMMITTED"

    def rollback(self) -> None:
        """Discard the half messages."""
        self.producer._end(self.id, TransactionResolution.ROLLBACK)
        self.state = "ROLLED_BACK"

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if self.state != "OPEN":
            return
        if exc_type is None:
            self.commit()
        elif self._parts:
            try:
                self.rollback()
            except MQError:  # the checker will roll it back; do not hide the real error
                log.warning("rolling back transaction %s failed", self.id, exc_info=True)
        else:
            self.state = "ROLLED_BACK"


class TransactionProducer:
    """Sends transactional messages for a producer group and answers the service's checks.

    ``checker`` is a callable (or a :class:`TransactionChecker`) given a
    :class:`TransactionMessageView`; it returns a :class:`TransactionResolution`. An
    exception, or anything else, answers UNKNOWN (asked again after the check interval).
    ``transactional_id`` (default: a new unique id) names this producer for fencing: give a
    stable one to make a restarted instance fence its predecessor. The check timings apply to
    the transactions this producer opens (defaults on the service: 6 s, 30 s, 15 checks).
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        producer_group: str,
        checker: Checker | None = None,
        transactional_id: str | None = None,
        check_immunity_seconds: int | None = None,
        check_interval_seconds: int | None = None,
        max_checks: int | None = None,
        poll_wait_s: float = 10.0,
        request_timeout_s: float = 30.0,
        max_attempts: int = 3,
        transport: Transport | None = None,
    ) -> None:
        self.producer_group = producer_group
        self.transactional_id = transactional_id or f"tp-{new_message_id()}"
        self.checker = checker
        self.poll_wait_s = poll_wait_s
        self._timings = {
            k: v
            for k, v in {
                "check_immunity_seconds": check_immunity_seconds,
                "check_interval_seconds": check_interval_seconds,
                "max_checks": max_checks,
            }.items()
            if v is not None
        }
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
        )
        self._stop = threading.Event()
        self.fenced = False
        """True once the service said a newer instance took over (this one stops)."""
        self.checks_answered = 0
        body = self._transport.request(
            "POST",
            f"{group_path(producer_group)}/producers",
            json_body={"transactional_id": self.transactional_id},
        )
        self.epoch = read_int(read_mapping(body), "epoch")
        """This instance's epoch (a newer registration of the same id fences it)."""
        self._thread = threading.Thread(
            target=self._poll_loop, name=f"cirrusmq-txn-checks-{producer_group}", daemon=True
        )
        self._thread.start()

    # -------------------------------------------------------------- transactions
    def begin_transaction(self) -> Transaction:
        """A new transaction (nothing is sent until its first ``send``)."""
        self._check_open()
        return Transaction(self, new_message_id())

    def _check_open(self) -> None:
        if self._stop.is_set():
            raise ClientClosedError("the producer is closed")

    def _send(
        self,
        txn: Transaction,
        part: int,
        messages: Sequence[Message],
        wire: list[dict[str, Any]] | None = None,
    ) -> list[TransactionReceipt]:
        self._check_open()
        born = now_ms()
        try:
            body = self._send_request(txn, part, messages, born, wire)
        except ProducerFencedError:
            self.fenced = True
            raise
        return [
            TransactionReceipt(read_str(r, "message_id"), read_int(r, "queue"), txn.id)
            for r in read_list(read_mapping(body), "receipts")
        ]

    def _offloaded(self, message: Message) -> Message:
        """``message`` naming its body uploaded now (a body above 4 MiB, or a file)."""
        pointer = upload_body(self._transport, message.topic, message.body)
        return dataclasses.replace(message, body=b"", large_body=pointer)

    def _send_request(
        self,
        txn: Transaction,
        part: int,
        messages: Sequence[Message],
        born: int,
        wire: list[dict[str, Any]] | None = None,
    ) -> Any:
        return self._transport.request(
            "POST",
            f"{transaction_path(self.producer_group, txn.id)}/messages",
            json_body={
                "topic": messages[0].topic,
                "transactional_id": self.transactional_id,
                "epoch": self.epoch,
                "part": part,
                "messages": wire or [m.to_wire(new_message_id(), born) for m in messages],
                **self._timings,
            },
        )

    def _end(self, transaction_id: str, resolution: TransactionResolution, check: bool = False):
        try:
            return self._transport.request(
                "POST",
                f"{transaction_path(self.producer_group, transaction_id)}/end",
                json_body={
                    "resolution": resolution.value,
                    "transactional_id": self.transactional_id,
                    "epoch": self.epoch,
                    "check": check,
                },
            )
        except ProducerFencedError:
            self.fenced = True
            raise

    # -------------------------------------------------------------------- checks
    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                body = self._transport.request(
                    "POST",
                    f"{group_path(self.producer_group)}/checks",
                    json_body={
                        "transactional_id": self.transactional_id,
                        "epoch": self.epoch,
                        "wait_seconds": self.poll_wait_s,
                    },
                    timeout_s=self.poll_wait_s + 15,
                    interrupt=self._stop,
                )
                for check in read_list(read_mapping(body), "checks"):
                    if self._stop.is_set():
                        return
                    self._answer(check)
            except ProducerFencedError:
                self.fenced = True
                log.warning(
                    "producer %s of group %s was fenced by a newer instance; it stops "
                    "answering checks",
                    self.transactional_id,
                    self.producer_group,
                )
                return
            except MQError:
                if self._stop.is_set():
                    return
                log.warning("polling transaction checks failed", exc_info=True)
                self._stop.wait(POLL_ERROR_PAUSE_S)

    def _answer(self, check: Any) -> None:
        view = _check_view(check)
        resolution = self._resolve(view)
        try:
            self._end(view.transaction_id, resolution, check=True)
            self.checks_answered += 1
        except ProducerFencedError:
            raise
        except MQError:
            log.warning("answering the check of %s failed", view.transaction_id, exc_info=True)

    def _resolve(self, view: TransactionMessageView) -> TransactionResolution:
        checker = self.checker
        if checker is None:
            return TransactionResolution.UNKNOWN
        try:
            if isinstance(checker, TransactionChecker):
                answer = checker.check(view)
            else:
                answer = checker(view)
        except Exception:
            log.exception("the transaction checker failed for %s", view.transaction_id)
            return TransactionResolution.UNKNOWN
        if not isinstance(answer, TransactionResolution):
            log.warning("the checker answered %r, not a TransactionResolution: UNKNOWN", answer)
            return TransactionResolution.UNKNOWN
        return answer

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop answering checks (idempotent). Open transactions stay open: the checks go
        to the group's other producers, or they roll back after the maximum checks."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._own_transport:
            self._transport.close()
        self._thread.join(timeout=1)  # an in-flight long poll ends on its own

    def __enter__(self) -> TransactionProducer:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def _check_view(check: Any) -> TransactionMessageView:
    data = read_mapping(check, "check")
    message = MessageView.from_wire(data.get("message"))
    fields = {name: getattr(message, name) for name in MessageView.__dataclass_fields__}
    return TransactionMessageView(
        **fields,
        transaction_id=read_str(data, "transaction_id"),
        check_number=read_int(data, "check_number"),
        message_count=read_int(data, "message_count"),
    )
