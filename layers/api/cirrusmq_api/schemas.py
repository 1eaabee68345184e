"""Wire schemas (JSON) of the v1 API; they also produce the OpenAPI document."""

from __future__ import annotations

from typing import Annotated, Literal

from cirrusmq_broker import limits
from cirrusmq_broker.rules.permissions import MAX_PATTERNS
from cirrusmq_broker.services.access_keys import MAX_DESCRIPTION_CHARS
from cirrusmq_broker.services.membership import ConsumerStatus
from pydantic import BaseModel, ConfigDict, Field, StrictBool

ReceiptHandleText = Annotated[str, Field(max_length=limits.MAX_RECEIPT_HANDLE_CHARS)]
"""A receipt handle as a request carries it (a longer text is no handle: the request is 400)."""


class Strict(BaseModel):
    """A request body: unknown fields are refused, and values are not coerced (strict
    mode, as the OpenAPI document's types say): ``true`` is not an integer, ``"1"`` is not
    a number, and an integer has no fraction (``2``, not ``2.0``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def __repr__(self) -> str:
        """Field names only: Powertools formats the route's arguments into a debug message
        on every request (an f-string, even with debug logging off), and the full repr of a
        1,000-message send cost milliseconds of billed Lambda time (it also kept secrets and
        message bodies out of any log)."""
        return f"{type(self).__name__}({', '.join(sorted(self.model_fields_set))})"


class ErrorBody(BaseModel):
    code: str = Field(description="Stable error code, e.g. TopicNotFound.")
    message: str
    details: dict | None = None


class CreateTopicRequest(Strict):
    name: str
    queues: int = Field(limits.DEFAULT_QUEUES, ge=limits.MIN_QUEUES, le=limits.MAX_QUEUES)
    message_type: Literal["NORMAL", "FIFO", "DELAY", "TRANSACTION"] = "NORMAL"
    retention_hours: int = Field(
        limits.DEFAULT_RETENTION_HOURS,
        ge=limits.MIN_RETENTION_HOURS,
        le=limits.MAX_RETENTION_HOURS,
    )
    trace: bool = Field(False, description="Record message trace events (one write per request).")


class UpdateTopicRequest(Strict):
    trace: bool | None = Field(None, description="Turn message trace on or off.")


class TopicBody(BaseModel):
    name: str
    queues: int
    message_type: str
    retention_hours: int
    created_timestamp: int
    trace: bool = False


class QueueOffsetsBody(BaseModel):
    queue: int
    min_offset: int
    max_offset: int = Field(description="Next offset to be written (exclusive).")


class TopicDescriptionBody(TopicBody):
    queue_offsets: list[QueueOffsetsBody]


class TopicListBody(BaseModel):
    topics: list[TopicBody]


class MessageIn(Strict):
    body: str = Field(description="Base64 (standard alphabet) message body, 1 byte to 4 MiB.")
    message_id: str | None = Field(None, description="Client-made id; generated when absent.")
    tag: str | None = None
    keys: list[str] = Field(default_factory=list)
    properties: dict[str, str] = Field(default_factory=dict)
    message_group: str | None = Field(None, description="Sharding key: one queue per group.")
    born_timestamp: int | None = Field(None, ge=0, description="Producer's clock, ms.")
    delay_level: int | None = Field(
        None, description="RocketMQ delay level 1-18 (1s 5s 10s 30s 1m ... 1h 2h)."
    )
    delivery_timestamp: int | None = Field(
        None,
        description="Deliver at this time (ms since the epoch), up to 365 days ahead; "
        "past-due: at once. Not with delay_level.",
    )


class SendRequest(Strict):
    producer_id: str | None = Field(None, min_length=1, max_length=limits.MAX_PRODUCER_ID_CHARS)
    sequence: int | None = Field(None, ge=0, le=2**63 - 1)
    messages: list[MessageIn]


class SendReceiptBody(BaseModel):
    message_id: str
    queue: int
    offset: int | None = Field(description="Null for a scheduled (delayed) message.")
    scheduled: bool = Field(False, description="True: delayed, visible at delivery_timestamp.")
    delivery_timestamp: int | None = Field(
        None, description="A scheduled message's due time (ms); cancel it with this time."
    )


class SendResponse(BaseModel):
    receipts: list[SendReceiptBody]
    duplicate: bool = Field(description="True when this producer id + sequence was stored before.")


class MessageBody(BaseModel):
    message_id: str
    topic: str
    queue: int
    offset: int
    body: str = Field(description="Base64 body.")
    tag: str | None
    keys: list[str]
    properties: dict[str, str]
    message_group: str | None
    born_timestamp: int
    stored_timestamp: int


class TraceEventBody(BaseModel):
    """One thing that happened to a message (null fields are left out)."""

    model_config = ConfigDict(extra="allow")
    kind: str = Field(
        description="sent, scheduled, released, committed, rolled_back, delivered, nacked, "
        "expired, moved_to_retry, dead_lettered, redriven or acked."
    )
    time: int = Field(description="Milliseconds since the epoch.")
    topic: str
    message_id: str


class TraceBody(BaseModel):
    topic: str
    message_id: str
    events: list[TraceEventBody]


class ReceivedMessageBody(MessageBody):
    receipt_handle: str
    delivery_attempt: int
    invisible_until: int


def documented_range(low: float, high: float) -> dict:
    """Bounds shown in the OpenAPI document; the service checks them (with specific codes)."""
    return {"json_schema_extra": {"minimum": low, "maximum": high}}


FilterType = Literal["TAG", "SQL92"]
FILTER_TYPE_DESCRIPTION = (
    "How `filter` is read: TAG ('*' or 'TagA || TagB') or SQL92 (a condition on the "
    "message's properties, e.g. \"a > 5 AND region IN ('eu', 'us')\"; TAGS is its tag)."
)


class ReceiveRequest(Strict):
    topic: str
    filter: str = Field("*", description="'*' or 'TagA || TagB'; with SQL92, a condition.")
    filter_type: FilterType = Field("TAG", description=FILTER_TYPE_DESCRIPTION)
    max_messages: int = Field(
        limits.DEFAULT_RECEIVE_MESSAGES, **documented_range(1, limits.MAX_RECEIVE_MESSAGES)
    )
    invisible_seconds: int = Field(
        limits.DEFAULT_INVISIBLE_SECONDS,
        **documented_range(limits.MIN_INVISIBLE_SECONDS, limits.MAX_INVISIBLE_SECONDS),
    )
    wait_seconds: float = Field(0, **documented_range(0, limits.MAX_WAIT_SECONDS))
    client_id: str | None = Field(
        None,
        description="The consumer's id (1-128 of A-Z a-z 0-9 @ . _ : -). On a FIFO topic it "
        "takes the queues' locks (orderly consumption); without it only unlocked queues "
        "are served and no lock is taken.",
    )
    ack: list[ReceiptHandleText] | None = Field(
        None,
        description="Receipt handles to ack before receiving (1-1,000, as the ack route takes "
        "them, with the same per-handle results and permission checks): one request instead "
        "of an ack and a receive. Their results are in the response's `acks`; a retriable "
        "failure of the ack fails the whole request before anything is received.",
    )


class AckRequest(Strict):
    receipt_handles: list[ReceiptHandleText]


class AckResultBody(BaseModel):
    receipt_handle: str
    status: Literal["acked", "expired", "invalid"] = Field(
        description="acked: settled now or before; expired: redelivered since, not acked; "
        "invalid: forged, corrupt or another group's handle."
    )
    code: str | None = Field(None, description="Error code when not acked.")
    message: str | None = None


class AckResponse(BaseModel):
    acked: int = Field(description="How many handles are settled (now or before).")
    results: list[AckResultBody] = Field(description="One per handle, in request order.")


class ReceiveResponse(BaseModel):
    messages: list[ReceivedMessageBody]
    acks: AckResponse | None = Field(
        None, description="The results of the request's `ack` handles (absent without them)."
    )
    next_due_ms: int | None = Field(
        None,
        description="With no messages: milliseconds until something of the group this receive "
        "could not serve yet may become receivable (a lease on the topic's queues or its retry "
        "topic ends, a retry's backoff passes), at least 1000; a hint to receive again then, "
        "not a promise. Null when none is known.",
    )


class SubscriptionRequest(Strict):
    filter: str = Field(description="'*' or 'TagA || TagB'; with SQL92, a condition.")
    filter_type: FilterType = Field("TAG", description=FILTER_TYPE_DESCRIPTION)


class SubscriptionBody(BaseModel):
    group: str
    topic: str
    filter: str = Field(
        description="The canonical filter: '*' or tags sorted, ' || '-joined; an SQL92 "
        "condition with keywords upper-case, single spaces and the parentheses it needs."
    )
    filter_type: FilterType = Field("TAG", description="TAG or SQL92.")


class ChangeInvisibleRequest(Strict):
    receipt_handle: ReceiptHandleText
    invisible_seconds: int = Field(
        ...,
        description="10-43200; on a FIFO topic 0-43200 and it applies to the message and the "
        "rest of its delivery (0: redeliver now to the queue's lock owner).",
        **documented_range(0, limits.MAX_INVISIBLE_SECONDS),
    )


class ChangeInvisibleResponse(BaseModel):
    receipt_handle: str
    invisible_until: int


class GroupQueueBody(BaseModel):
    topic: str
    queue: int
    committed_offset: int
    cursor: int
    max_offset: int
    lag: int
    inflight: int
    oldest_unacked_offset: int | None = Field(
        None, description="Lowest delivered offset not yet acked (holds committed_offset)."
    )
    oldest_unacked_attempt: int | None = Field(None, description="Its delivery attempt.")


class GroupSubscriptionBody(BaseModel):
    topic: str
    filter: str
    filter_type: FilterType = Field("TAG", description="TAG or SQL92.")


# ------------------------------------------------------------ consumers
class HeartbeatRequest(Strict):
    client_id: str = Field(description="1-128 of A-Z a-z 0-9 @ . _ : -")
    subscriptions: dict[str, str] = Field(
        default_factory=dict, description="Topic -> filter ('*' or 'TagA || TagB')."
    )
    filter_types: dict[str, FilterType] = Field(
        default_factory=dict,
        description="Topic -> TAG or SQL92, how its filter is read (TAG when absent).",
    )
    orderly: StrictBool = False
    heartbeat_timeout_seconds: int = Field(
        120,
        description="Silent this long, the consumer is removed (its queues move).",
        **documented_range(5, 3600),
    )


class ConsumerQueuesBody(BaseModel):
    topic: str
    filter: str
    queues: list[int] | None = Field(
        description="Queues allocated to it (FIFO topics); null: every queue, shared."
    )


class ConsumerBody(BaseModel):
    client_id: str
    orderly: bool
    last_heartbeat: int
    expires_at: int
    topics: list[ConsumerQueuesBody]


def consumer_body(status: ConsumerStatus) -> ConsumerBody:
    return ConsumerBody(
        client_id=status.client_id,
        orderly=status.orderly,
        last_heartbeat=status.last_heartbeat,
        expires_at=status.expires_at,
        topics=[
            ConsumerQueuesBody(topic=t, filter=f, queues=status.queues.get(t))
            for t, f in sorted(status.topics.items())
        ],
    )


# ------------------------------------------------------------ end consumers


class GroupBody(BaseModel):
    group: str
    queues: list[GroupQueueBody]
    subscriptions: list[GroupSubscriptionBody]
    max_delivery_attempts: int | None = Field(
        None, description="Deliveries before a message goes to the dead-letter topic."
    )
    consumers: list[ConsumerBody] = Field(
        default_factory=list, description="Live consumers (registered by heartbeats)."
    )


class HealthBody(BaseModel):
    status: str
    version: str
    ws_endpoint: str | None = None
    """The notification channel's WebSocket URL (idle consumers wait there); None: none."""


PERMISSION_PATTERN = r"^(?:[A-Za-z0-9_-]{1,127}|[A-Za-z0-9_-]{0,126}\*)$"
Pattern = Annotated[
    str,
    Field(
        pattern=PERMISSION_PATTERN,
        description="A name, or a prefix ending in '*' (e.g. 'orders', 'audit-*', '*').",
    ),
]


class SubscribeGrantBody(Strict):
    groups: list[Pattern] = Field(min_length=1, max_length=MAX_PATTERNS)
    topics: list[Pattern] = Field(min_length=1, max_length=MAX_PATTERNS)


class PermissionsBody(Strict):
    admin: StrictBool = Field(False, description="Everything, access keys included.")
    publish: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS)
    subscribe: list[SubscribeGrantBody] = Field(default_factory=list, max_length=MAX_PATTERNS)


class CreateKeyRequest(Strict):
    permissions: PermissionsBody
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)


class KeyBody(BaseModel):
    access_key: str
    description: str
    permissions: PermissionsBody
    status: Literal["ACTIVE", "DISABLED"]
    created_timestamp: int


class CreatedKeyBody(KeyBody):
    secret_key: str = Field(description="Shown only in this answer; store it safely.")


class KeyListBody(BaseModel):
    keys: list[KeyBody]
