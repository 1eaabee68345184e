"""Message actions: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
ChangeMessageVisibility(Batch) — over the produce and consume services."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cirrusmq_broker import limits
from cirrusmq_broker.errors import BrokerError, ReceiptHandleExpired
from cirrusmq_broker.message_ids import as_uuid, new_message_id
from cirrusmq_broker.model import MessageInput, ProducerStamp, ReceivedMessage
from cirrusmq_broker.rules.retries import (
    DEAD_LETTER_DELIVERIES_PROPERTY,
    REDELIVERY_IMMEDIATE,
    retry_origin,
)

from . import naming, queue_attributes, receipts
from .context import Call, int_param, list_param
from .digests import md5_of_attributes, md5_of_body
from .errors import (
    SqsError,
    batch_error,
    empty_batch,
    from_broker,
    invalid_parameter,
    receipt_handle_invalid,
)
from .message_attributes import (
    DEDUP_ID_PROPERTY,
    INVALID_TEXT,
    SENDER_PROPERTY,
    SOURCE_PROPERTY,
    TRACE_PROPERTY,
    check_attributes,
    check_system_attributes,
    from_message,
    select,
    sqs_text,
    to_message_fields,
    trace_from_header,
)
from .naming import QueueName
from .queue_actions import active_topic, attributes_of, keep_dead_letter_destination
from .queue_attributes import dedup_scope

MAX_BATCH = 10
MAX_DELAY_SECONDS = 900
MAX_BATCH_BYTES = 1_048_576
"""SQS's limit on the messages of one SendMessageBatch together."""
MAX_RECEIVE = 10
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_DEDUP_ID = re.compile(r"[!-~]{1,128}")
_GROUP_ID = _DEDUP_ID
"""SQS's MessageGroupId: 1-128 printable ASCII characters, like a deduplication id."""
VISIBILITY_RANGE = f"Must be >= 0 and <= {limits.MAX_INVISIBLE_SECONDS}, if provided."
"""SQS's reason for a VisibilityTimeout out of range."""
DEDUP_PRODUCER_PREFIX = "sqs-dedup."
DEDUP_SCOPE = "sqs"
"""FIFO deduplication stamps are the queue's, whoever sends: one scope for all keys."""
DEDUP_INTERVAL_MS = 5 * 60 * 1000
"""SQS's deduplication interval: a deduplication id repeated within it of the first
accepted send is not sent again."""
SEQUENCE_BASE = 10**19
SEQUENCE_QUEUE_SLOTS = 1024
"""A FIFO message's SequenceNumber: ``SEQUENCE_BASE + offset * SEQUENCE_QUEUE_SLOTS + queue``
of the topic queue it was stored in, as a 20-digit decimal string. A message group lives on
one topic queue, whose offsets only grow: the numbers of a group grow with its messages,
and no two messages of a topic share one (more than 64 queues would not fit a slot)."""


def sequence_number(queue: int, offset: int) -> str:
    """The SequenceNumber of the message at ``offset`` of topic queue ``queue``."""
    return str(SEQUENCE_BASE + offset * SEQUENCE_QUEUE_SLOTS + queue)


# ------------------------------------------------------------------------------ send
@dataclass(frozen=True)
class Outgoing:
    """One message to send, the digests its answer carries, and (FIFO) its dedup stamp."""

    message: MessageInput
    digests: dict[str, Any]
    stamp: ProducerStamp | None = None


@dataclass(frozen=True)
class Sent:
    """Where a message was stored: its id, and on a FIFO queue its SequenceNumber."""

    message_id: str
    sequence_number: str | None = None


def _dedup_id(entry: dict[str, Any], body: str, attributes: dict[str, str]) -> str:
    """A FIFO message's deduplication id: explicit, or (``ContentBasedDeduplication``) the
    SHA-256 of its body."""
    dedup = entry.get("MessageDeduplicationId")
    if dedup is None and attributes.get("ContentBasedDeduplication") == "true":
        dedup = hashlib.sha256(body.encode("utf-8")).hexdigest()
    if dedup is None:
        raise invalid_parameter(
            "The queue should either have ContentBasedDeduplication enabled or "
            "MessageDeduplicationId provided explicitly"
        )
    if not isinstance(dedup, str) or not _DEDUP_ID.fullmatch(dedup):
        raise _invalid_id("MessageDeduplicationId", dedup)
    return dedup


def _invalid_id(name: str, value: Any) -> SqsError:
    """SQS's error for a MessageGroupId / MessageDeduplicationId outside its 1-128 printable
    ASCII characters; the value is echoed (a longer one cut at 1000 characters)."""
    return invalid_parameter(
        f"Value {str(value)[:1000]} for parameter {name} is invalid. Reason: {name} can only "
        "include alphanumeric and punctuation characters. 1 to 128 in length."
    )


def _dedup_stamp(
    queue: QueueName, dedup: str, group: str | None, purged: str | None
) -> ProducerStamp:
    """A FIFO message's deduplication id as the stamp of a deduplicating send: a repeat of
    it on the queue (or, with ``DeduplicationScope`` ``messageGroup``, in its ``group``)
    within :data:`DEDUP_INTERVAL_MS` of its first accepted send stores nothing and answers
    that send; a later one is a new message (the broker's deduplication window). After a
    purge (at ``purged``) the key is another: the ids sent before it are forgotten."""
    scope = f"{queue.topic}\n{dedup}" if group is None else f"{queue.topic}\n{group}\n{dedup}"
    if purged is not None:
        scope = f"{scope}\npurged {purged}"
    key = hashlib.sha256(scope.encode()).hexdigest()[:40]
    return ProducerStamp(f"{DEDUP_PRODUCER_PREFIX}{key}", 0, DEDUP_SCOPE)


def _message(
    call: Call,
    queue: QueueName,
    entry: dict[str, Any],
    attributes: dict[str, str],
) -> Outgoing:
    """The message to send for one SendMessage (entry) to a queue with ``attributes``, and
    its answer's digests."""
    body = entry.get("MessageBody")
    if not isinstance(body, str) or not body:
        raise SqsError("MissingParameter", "The request must contain the parameter MessageBody.")
    if INVALID_TEXT.search(body):
        raise SqsError(
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
            "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    data = body.encode("utf-8")
    most = min(int(attributes["MaximumMessageSize"]), limits.MAX_BODY_BYTES)
    if _payload_bytes(entry) > most:  # the body and the attributes count, as SQS counts
        raise invalid_parameter(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{most} bytes."
        )
    message_attributes = check_attributes(entry.get("MessageAttributes"))
    system = check_system_attributes(entry.get("MessageSystemAttributes"))
    if not system:
        system = trace_from_header(call.trace_header)
    delay = int_param(
        entry, "DelaySeconds", 0, MAX_DELAY_SECONDS,
        reason=f"DelaySeconds must be >= 0 and <= {MAX_DELAY_SECONDS}.",
    )  # fmt: skip
    group = entry.get("MessageGroupId")
    if group is not None and not (isinstance(group, str) and _GROUP_ID.fullmatch(group)):
        raise _invalid_id("MessageGroupId", group)
    if queue.fifo:
        if delay:
            raise invalid_parameter(
                f"Value {delay} for parameter DelaySeconds is invalid. Reason: The request "
                "include parameter that is not valid for this queue type."
            )
        if not isinstance(group, str) or not group:
            raise SqsError(
                "MissingParameter", "The request must contain the parameter MessageGroupId."
            )
    stamp, message_id, not_before = None, None, None
    now = call.broker.clock()
    fields = to_message_fields(message_attributes)
    if queue.fifo:
        dedup = _dedup_id(entry, body, attributes)
        group_scope = dedup_scope(attributes) == "messageGroup"
        stamp = _dedup_stamp(
            queue, dedup, group if group_scope else None, attributes.get(queue_attributes.PURGED)
        )
        message_id = new_message_id()  # a stamped send's broker-made id is no ULID
        fields["properties"] = {**fields["properties"], DEDUP_ID_PROPERTY: dedup}
        # the queue's delay holds the message in its group's order until due (stored now:
        # its SequenceNumber and deduplication are those of this send)
        queue_delay = int(attributes["DelaySeconds"])
        not_before = now + queue_delay * 1000 if queue_delay else None
        delay = 0
    elif delay is None:
        delay = int(attributes["DelaySeconds"])
    message = MessageInput(
        body=data,
        message_id=message_id,
        tag=fields["tag"],
        keys=fields["keys"],
        properties={
            **fields["properties"],
            **system,
            SENDER_PROPERTY: call.principal.access_key,
        },
        message_group=group if isinstance(group, str) and group else None,
        delivery_timestamp=now + delay * 1000 if delay else None,
        not_before=not_before,
    )
    digests = {"MD5OfMessageBody": md5_of_body(body)}
    if message_attributes:
        digests["MD5OfMessageAttributes"] = md5_of_attributes(message_attributes)
    if entry.get("MessageSystemAttributes"):
        digests["MD5OfMessageSystemAttributes"] = md5_of_attributes(
            entry["MessageSystemAttributes"]
        )
    return Outgoing(message, digests, stamp)


def _send(call: Call, queue: QueueName, outgoing: list[Outgoing]) -> list[Sent]:
    """Send a standard queue's messages in one produce call, a FIFO queue's one by one
    (each deduplicated under its own stamp for SQS's interval)."""
    try:
        if not queue.fifo:
            result = call.broker.produce.send(queue.topic, [o.message for o in outgoing])
            return [Sent(r.message_id) for r in result.receipts]
        sent = []
        for one in outgoing:
            result = call.broker.produce.send(
                queue.topic, [one.message], one.stamp, deduplication_ms=DEDUP_INTERVAL_MS
            )
            (receipt,) = result.receipts
            assert receipt.offset is not None  # a FIFO topic takes no delayed messages
            sent.append(Sent(receipt.message_id, sequence_number(receipt.queue, receipt.offset)))
        return sent
    except BrokerError as exc:
        raise from_broker(exc) from None


def _answer(sent: Sent) -> dict[str, str]:
    answer = {"MessageId": as_uuid(sent.message_id)}
    if sent.sequence_number is not None:
        answer["SequenceNumber"] = sent.sequence_number
    return answer


def _queue_for_send(call: Call, params: dict[str, Any]) -> tuple[QueueName, dict[str, str]]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(call.principal.permissions.may_publish(queue.topic), f"send to queue {queue.name}")
    active_topic(call, queue)
    return queue, attributes_of(call, queue)


def send_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, attributes = _queue_for_send(call, params)
    outgoing = _message(call, queue, params, attributes)
    (sent,) = _send(call, queue, [outgoing])
    return {**_answer(sent), **outgoing.digests}


def send_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, attributes = _queue_for_send(call, params)
    entries = _entries(params, "SendMessageBatchRequestEntry")
    _check_batch_size(entries)
    if queue.fifo:
        _check_fifo_entries(entries, attributes)
    successful: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    outgoing: list[Outgoing] = []
    for entry in entries:
        try:
            one = _message(call, queue, entry, attributes)
        except SqsError as exc:
            failed.append(_failure(entry["Id"], exc))
            continue
        outgoing.append(one)
        successful.append({"Id": entry["Id"], **one.digests})
    if outgoing:
        for answer, sent in zip(successful, _send(call, queue, outgoing), strict=True):
            answer.update(_answer(sent))
    return batch_answer(successful, failed)


def _check_fifo_entries(entries: list[dict[str, Any]], attributes: dict[str, str]) -> None:
    """SQS refuses a whole FIFO batch (not the one entry) when an entry lacks its
    MessageGroupId, or its MessageDeduplicationId on a queue without content-based
    deduplication; nothing of it is sent."""
    content_based = attributes.get("ContentBasedDeduplication") == "true"
    for entry in entries:
        if entry.get("MessageGroupId") in (None, ""):
            raise invalid_parameter("The request must contain the parameter MessageGroupId.")
        if entry.get("MessageDeduplicationId") is None and not content_based:
            raise invalid_parameter(
                "The queue should either have ContentBasedDeduplication enabled or "
                "MessageDeduplicationId provided explicitly"
            )


def _entries(params: dict[str, Any], entry_type: str) -> list[dict[str, Any]]:
    """A batch's entries, checked in SQS's order: present, ids valid, ids distinct, at most
    :data:`MAX_BATCH`. ``entry_type`` names them in SQS's empty-batch message."""
    entries = params.get("Entries")
    if not entries:
        raise empty_batch(entry_type)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise invalid_parameter("Entries must be a list of entries.")
    ids = [e.get("Id") for e in entries]
    for batch_id in ids:
        if not isinstance(batch_id, str) or not _BATCH_ID.fullmatch(batch_id):
            raise batch_error(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                "underscores. It can be at most 80 letters long.",
            )
    _check_distinct(ids)
    if len(entries) > MAX_BATCH:
        raise batch_error(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(entries)}.",
        )
    return entries


def _check_distinct(ids: list[str]) -> None:
    """SQS names the first id that comes again."""
    seen: set[str] = set()
    for batch_id in ids:
        if batch_id in seen:
            raise batch_error("BatchEntryIdsNotDistinct", f"Id {batch_id} repeated.")
        seen.add(batch_id)


def _check_batch_size(entries: list[dict[str, Any]]) -> None:
    """SQS's limit on a batch's payload: its bodies and attributes, 1 MiB in all."""
    total = sum(_payload_bytes(entry) for entry in entries)
    if total > MAX_BATCH_BYTES:
        raise batch_error(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. "
            f"You have sent {total} bytes.",
        )


def _payload_bytes(entry: dict[str, Any]) -> int:
    """A message's size as SQS counts it: the body's UTF-8 bytes and each attribute's name,
    data type and value."""
    body = entry.get("MessageBody")
    size = len(body.encode("utf-8", "surrogatepass")) if isinstance(body, str) else 0
    attributes = entry.get("MessageAttributes")
    for name, value in attributes.items() if isinstance(attributes, dict) else ():
        size += len(str(name).encode("utf-8", "surrogatepass"))
        if isinstance(value, dict):
            for part in ("DataType", "StringValue", "BinaryValue"):
                if isinstance(value.get(part), str):
                    size += len(value[part].encode("utf-8", "surrogatepass"))
    return size


def batch_answer(successful: list[dict[str, Any]], failed: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch action's answer as SQS gives it: an empty ``Successful`` or ``Failed`` list is
    left out (over AWS JSON too, as over the query protocol, where it has no element)."""
    answer: dict[str, Any] = {}
    if successful:
        answer["Successful"] = successful
    if failed:
        answer["Failed"] = failed
    return answer


def _failure(entry_id: str, exc: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": exc.sender, "Code": exc.code, "Message": exc.message}


# --------------------------------------------------------------------------- receive
def _consumer(call: Call, params: dict[str, Any]) -> QueueName:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(
        call.principal.permissions.may_subscribe(queue.group, queue.topic),
        f"receive from queue {queue.name} (consume topic {queue.topic} as group {queue.group})",
    )
    return queue


def _may_consume(call: Call, queue: QueueName) -> Callable[[str], bool]:
    permissions = call.principal.permissions

    def allowed(topic: str) -> bool:
        origin = retry_origin(queue.group, topic)
        return permissions.may_subscribe(queue.group, topic if origin is None else origin)

    return allowed


def _visibility(params: dict[str, Any]) -> int | None:
    return int_param(
        params, "VisibilityTimeout", 0, limits.MAX_INVISIBLE_SECONDS, reason=VISIBILITY_RANGE
    )


def _sqs_redelivery(call: Call, queue: QueueName) -> None:
    """The queue's group redelivers as SQS does: a message whose visibility timeout passed
    is receivable again at once (in place), and a visibility timeout may be 0. Written once
    (a topic made through the CirrusMQ API gets it at its first SQS receive or change)."""
    try:
        call.broker.retries.set_redelivery(queue.group, REDELIVERY_IMMEDIATE)
    except BrokerError as exc:
        raise from_broker(exc) from None


def receive_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = _consumer(call, params)
    most = (
        int_param(
            params, "MaxNumberOfMessages", 1, MAX_RECEIVE,
            reason=f"Must be between 1 and {MAX_RECEIVE}, if provided.",
        )
        or 1
    )  # fmt: skip
    visibility = _visibility(params)
    wait = int_param(
        params, "WaitTimeSeconds", 0, limits.MAX_WAIT_SECONDS,
        reason=f"Must be >= 0 and <= {limits.MAX_WAIT_SECONDS}, if provided.",
    )  # fmt: skip
    system_names = list_param(params, "AttributeNames") + list_param(
        params, "MessageSystemAttributeNames"
    )
    attribute_names = list_param(params, "MessageAttributeNames")
    topic = active_topic(call, queue)
    attributes = attributes_of(call, queue)
    if visibility is None:
        visibility = int(attributes["VisibilityTimeout"])
    if wait is None:
        wait = int(attributes["ReceiveMessageWaitTimeSeconds"])
    _sqs_redelivery(call, queue)
    received_at = call.broker.clock()
    purged = attributes.get(queue_attributes.PURGED)
    give_up = time.monotonic() + wait
    try:
        keep_dead_letter_destination(call, queue, attributes)
        while True:
            received = call.broker.consume.receive(
                queue.group, topic.name, max_messages=most, invisible_seconds=visibility,
                wait_seconds=wait, per_group=queue.fifo,
            )  # fmt: skip
            received, dropped = _past_purge(received, purged)
            if dropped:
                call.broker.consume.ack(queue.group, dropped, _may_consume(call, queue))
            wait = int(give_up - time.monotonic())
            if received or not dropped or wait <= 0:
                break
    except BrokerError as exc:
        raise from_broker(exc) from None
    now = call.broker.clock()
    messages = [
        _received(r, system_names, attribute_names, now, queue.fifo, received_at, call.region)
        for r in received
    ]
    return {"Messages": messages} if messages else {}


def _past_purge(
    received: list[ReceivedMessage], purged: str | None
) -> tuple[list[ReceivedMessage], list[str]]:
    """The messages to answer, and the receipt handles of those to delete instead: delayed
    messages sent before the queue's last purge (``purged``, ms), released since. SQS's
    purge deletes delayed messages too; the purge moved the group past what was stored, the
    delayed ones are deleted as they come."""
    if purged is None:
        return received, []
    kept, dropped = [], []
    for one in received:
        stored = one.message
        if stored.system.delivery_timestamp is not None and stored.born_timestamp < int(purged):
            dropped.append(one.receipt_handle)
        else:
            kept.append(one)
    return kept, dropped


def _received(
    received: ReceivedMessage,
    system_names: list[str],
    attribute_names: list[str],
    now: int,
    fifo: bool,
    received_at: int,
    region: str,
) -> dict[str, Any]:
    """One message of a receive answer; its handle names ``received_at``, when the receive
    was asked. ``ApproximateFirstReceiveTimestamp`` is this receive's time on a first
    delivery; on a redelivery (the first receive is not recorded) the time this copy of
    the message was stored. A dead letter counts the receives it had in its source queue
    too, and names that queue (``DeadLetterQueueSourceArn``), as SQS's dead letters do."""
    stored = received.message
    receive_count = received.delivery_attempt
    source = None
    if stored.system.dead_letter_reason is not None:  # set by the broker's dead-letter move
        before = stored.properties.get(DEAD_LETTER_DELIVERIES_PROPERTY, "")
        receive_count += int(before) if before.isdecimal() else 0
        source = stored.properties.get(SOURCE_PROPERTY)
    body = sqs_text(stored.body.decode("utf-8", "replace"))
    answer: dict[str, Any] = {
        "MessageId": as_uuid(stored.message_id),
        "ReceiptHandle": receipts.issue(sqs_receipt_handle(received.receipt_handle), received_at),
        "MD5OfBody": md5_of_body(body),
        "Body": body,
    }
    system = {
        "SentTimestamp": str(stored.born_timestamp or stored.stored_timestamp),
        "ApproximateReceiveCount": str(receive_count),
        "ApproximateFirstReceiveTimestamp": str(
            now if receive_count <= 1 else stored.stored_timestamp
        ),
    }
    if stored.properties.get(SENDER_PROPERTY):
        system["SenderId"] = sqs_text(stored.properties[SENDER_PROPERTY])
    if stored.properties.get(TRACE_PROPERTY):
        system["AWSTraceHeader"] = sqs_text(stored.properties[TRACE_PROPERTY])
    if stored.message_group:
        system["MessageGroupId"] = sqs_text(stored.message_group)
    dedup = stored.properties.get(DEDUP_ID_PROPERTY)
    if dedup is not None:
        system["MessageDeduplicationId"] = sqs_text(dedup)
    if fifo:
        system["SequenceNumber"] = sequence_number(stored.queue, stored.offset)
    if source:
        system["DeadLetterQueueSourceArn"] = QueueName(source).arn(region)
    if "All" not in system_names:
        system = {k: v for k, v in system.items() if k in system_names}
    if system:
        answer["Attributes"] = system
    chosen = select(from_message(stored), attribute_names)
    if chosen:
        answer["MessageAttributes"] = chosen
        answer["MD5OfMessageAttributes"] = md5_of_attributes(chosen)
    return answer


# ------------------------------------------------------------------ delete, visibility
def sqs_receipt_handle(handle: str) -> str:
    """A broker receipt handle as SQS clients get it: its URL-safe base64 ``-`` becomes
    ``+`` (standard base64, as SQS's own handles). The SQS Extended Client wraps a handle
    in ``-``-delimited markers and recovers it as the text after the last ``-``."""
    return handle.replace("-", "+")


def _handle(entry: dict[str, Any]) -> str:
    """The receipt handle an SQS request names, as sent."""
    handle = entry.get("ReceiptHandle")
    if not isinstance(handle, str) or not handle:
        raise SqsError("MissingParameter", "The request must contain the parameter ReceiptHandle.")
    return handle


def _broker_handle(handle: str) -> str:
    """The broker receipt handle inside an SQS one (one with ``-`` is taken too)."""
    return receipts.broker_handle(handle.replace("+", "-"))


def _delete(call: Call, queue: QueueName, handles: list[str]) -> list[SqsError | None]:
    try:
        outcomes = call.broker.consume.ack(
            queue.group, [_broker_handle(h) for h in handles], _may_consume(call, queue),
            within_visibility=queue.fifo,
        )  # fmt: skip
    except BrokerError as exc:
        raise from_broker(exc) from None
    results: list[SqsError | None] = []
    for handle, outcome in zip(handles, outcomes, strict=True):
        if outcome.status == "invalid":
            results.append(
                receipt_handle_invalid(
                    f'The input receipt handle "{handle}" is not a valid receipt handle.'
                )
            )
        elif outcome.status == "expired" and queue.fifo:  # SQS deletes FIFO messages by
            # the handle of their current receive only, within its visibility timeout
            results.append(
                invalid_parameter(
                    f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The "
                    "receipt handle has expired."
                )
            )
        else:  # acked, or its lease expired: SQS deletes with an old handle without error
            results.append(None)
    return results


def delete_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = _consumer(call, params)
    handle = _handle(params)
    active_topic(call, queue)
    (error,) = _delete(call, queue, [handle])
    if error is not None:
        raise error
    return {}


def delete_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = _consumer(call, params)
    entries = _entries(params, "DeleteMessageBatchRequestEntry")
    active_topic(call, queue)
    successful, failed, handles, ids = [], [], [], []
    for entry in entries:
        try:
            handles.append(_handle(entry))
            ids.append(entry["Id"])
        except SqsError as exc:
            failed.append(_failure(entry["Id"], exc))
    for entry_id, error in zip(ids, _delete(call, queue, handles) if handles else [], strict=True):
        if error is None:
            successful.append({"Id": entry_id})
        else:
            failed.append(_failure(entry_id, error))
    return batch_answer(successful, failed)


def _change(call: Call, queue: QueueName, entry: dict[str, Any]) -> None:
    handle = _handle(entry)
    timeout = _visibility(entry)
    if timeout is None:
        raise SqsError(
            "MissingParameter", "The request must contain the parameter VisibilityTimeout."
        )
    active_topic(call, queue)
    receipts.check_total_visibility(handle, timeout, call.broker.clock())
    _sqs_redelivery(call, queue)
    try:
        call.broker.consume.change_invisible(
            queue.group, _broker_handle(handle), timeout, _may_consume(call, queue),
            per_group=queue.fifo, latest=not queue.fifo,
        )  # fmt: skip
    except ReceiptHandleExpired:  # deleted (a standard queue's older handle names the
        # message's current receive; a FIFO queue's, as SQS's, only its own)
        raise invalid_parameter(
            f"Value {entry['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: "
            "Message does not exist or is not available for visibility timeout change."
        ) from None
    except BrokerError as exc:
        raise from_broker(exc) from None


def change_message_visibility(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = _consumer(call, params)
    _change(call, queue, params)
    return {}


def change_message_visibility_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = _consumer(call, params)
    entries = _entries(params, "ChangeMessageVisibilityBatchRequestEntry")
    successful, failed = [], []
    for entry in entries:
        try:
            _change(call, queue, entry)
        except SqsError as exc:
            failed.append(_failure(entry["Id"], exc))
        else:
            successful.append({"Id": entry["Id"]})
    return batch_answer(successful, failed)
