"""Transactional messages of the protocol on CirrusMQ's transactions.

A publish carries no producer group, so a topic's half messages belong to the producer
group ``MQHTTP-<topic>``: each publish with ``__TransCheckT`` is a transaction of one
message, opened by a transactional id of its own (registered, epoch 1), checked after
``__TransCheckT`` seconds. Its receipt handle names the transaction and that producer;
``trans=pop`` registers a poller, takes the due back-checks of the topic's transactions
(whichever group id asks) and hands out handles naming that poller, with which it answers.

The transactional id and the transaction id of a publish are derived from the request
(:func:`publish_key`). The client sends a request whose answer it lost again as it was
(same ``Date``, same signature, same body): that resend finds the registration and the
recorded half message of the first one, so it opens no second transaction and answers the
same message id and receipt handle. A publish writes what it wrote before: one
registration (a conditional put that leaves an existing one alone) and the half part.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from dataclasses import dataclass

from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import BrokerError
from cirrusmq_broker.model import MessageInput, ReceivedMessage
from cirrusmq_broker.rules.transaction_state import CheckTimings, Resolution
from cirrusmq_broker.services.auth import Principal

from .errors import MqHttpError
from .messages import consumed

GROUP_PREFIX = "MQHTTP-"
HANDLE_PREFIX = "MQT1."
CHECK_CLAIM_SECONDS = 15
"""How long a popped back-check is held for its poller (the broker's claim)."""


@dataclass(frozen=True)
class HalfSent:
    message_id: str
    handle: str


def producer_group(topic: str) -> str:
    return f"{GROUP_PREFIX}{topic}"[:127]


def _handle(topic: str, transaction_id: str, producer: tuple[str, int], check: bool) -> str:
    text = json.dumps(
        [topic, transaction_id, producer[0], producer[1], check], separators=(",", ":")
    )
    return HANDLE_PREFIX + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _read_handle(handle: str) -> tuple[str, str, tuple[str, int], bool] | None:
    if not handle.startswith(HANDLE_PREFIX):
        return None
    try:
        data = base64.urlsafe_b64decode(handle[len(HANDLE_PREFIX) :] + "==")
        topic, txn, tid, epoch, check = json.loads(data)
    except (binascii.Error, ValueError, TypeError):
        return None
    if not all(isinstance(v, str) for v in (topic, txn, tid)) or not isinstance(epoch, int):
        return None
    return topic, txn, (tid, epoch), bool(check)


def _owner(principal: Principal) -> str | None:
    return None if principal.permissions.admin else principal.access_key


def _register(topic: str, principal: Principal) -> tuple[str, int]:
    transactional_id = f"mqhttp.{uuid.uuid4().hex}"
    epoch = current_broker().transactions.register(
        producer_group(topic),
        transactional_id,
        access_key=principal.access_key,
        admin=principal.permissions.admin,
    )
    return transactional_id, epoch


def publish_key(access_key: str, date: str, target: str, body: bytes) -> str:
    """The identity of a publish request as the client sends it (and sends it again after
    a lost answer): its access key, ``Date`` header, request-target (topic and instance)
    and body, as a SHA-256 hex digest.

    Two publishes differ in one of these unless the same key publishes the very same
    message to the same topic twice within one second (the ``Date`` header's resolution):
    those are one request on the wire, and one half message. A resend is accepted only
    while its ``Date`` is within the signature's skew window (15 min); the registration
    and the transaction it finds are kept far longer."""
    digest = hashlib.sha256()
    for part in (access_key, date, target):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\n")
    digest.update(body)
    return digest.hexdigest()


def send_half(
    topic: str, message: MessageInput, immunity: int, principal: Principal, request_key: str
) -> HalfSent:
    """Open a transaction of one half message, named by ``request_key``
    (:func:`publish_key`); its handle commits or rolls it back. The request sent again
    answers the same message id and handle."""
    timings = CheckTimings(immunity_seconds=immunity)
    broker = current_broker()
    broker.transactions.check_send(topic, [message])  # refused: nothing registered
    transactional_id = f"mqhttp.{request_key[:32]}"
    epoch = broker.transactions.register_once(
        producer_group(topic),
        transactional_id,
        access_key=principal.access_key,
        admin=principal.permissions.admin,
    )
    producer = (transactional_id, epoch)
    transaction_id = request_key[32:64]
    result = broker.transactions.send(
        producer_group(topic),
        transaction_id,
        transactional_id=producer[0],
        epoch=producer[1],
        topic_name=topic,
        inputs=[message],
        part=0,
        timings=timings,
        access_key=_owner(principal),
    )
    return HalfSent(result.receipts[0].message_id, _handle(topic, transaction_id, producer, False))


def pop_checks(topic: str, group: str, batch: int, wait: int, principal: Principal) -> list[str]:
    """The due back-checks of ``topic``'s transactions as consumed messages."""
    permissions = principal.permissions
    if not permissions.may_publish(topic):
        raise MqHttpError(403, "AccessDenied", f"this access key may not publish to topic {topic}")
    broker = current_broker()
    broker.transactions.transactional_topic(topic)  # refused: nothing registered
    producer = _register(topic, principal)
    checks = broker.transactions.poll_checks(
        producer_group(topic),
        producer[0],
        producer[1],
        wait_seconds=wait,
        max_checks=batch,
        access_key=_owner(principal),
        allowed=lambda t: t == topic and permissions.may_publish(t),
        readable=permissions.may_subscribe_topic,
    )
    until = broker.clock() + CHECK_CLAIM_SECONDS * 1000
    return [
        consumed(
            ReceivedMessage(
                message=c.message,
                receipt_handle=_handle(topic, c.transaction_id, producer, True),
                delivery_attempt=max(1, c.check_number),
                invisible_until=until,
            ),
            CHECK_CLAIM_SECONDS,
        )
        for c in checks
    ]


def end(
    topic: str, group: str, handles: list[str], verdict: str, principal: Principal
) -> list[tuple[str, str, str]]:
    """Commit or roll back the transaction of each handle; (code, message, handle) of each
    that failed."""
    permissions = principal.permissions
    failed = []
    for handle in handles:
        read = _read_handle(handle)
        if read is None or read[0] != topic:
            failed.append(("ReceiptHandleError", "not a transaction handle of this topic", handle))
            continue
        _, transaction_id, producer, check = read
        try:
            current_broker().transactions.end(
                producer_group(topic),
                transaction_id,
                Resolution.COMMIT if verdict == "commit" else Resolution.ROLLBACK,
                producer=producer,
                by="check" if check else "producer",
                allowed=permissions.may_publish,
                access_key=_owner(principal),
                readable=permissions.may_subscribe_topic,
            )
        except BrokerError as exc:
            if exc.http_status >= 500:
                raise
            failed.append(("ReceiptHandleError", exc.message or exc.code, handle))
    return failed
