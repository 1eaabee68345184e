"""Wire schemas of retries and dead letters: nack, group settings, DLQ admin."""

from __future__ import annotations

from cirrusmq_broker import limits
from cirrusmq_broker.rules.retries import (
    MAX_MAX_DELIVERY_ATTEMPTS,
    MAX_NACK_DELAY_SECONDS,
    MIN_MAX_DELIVERY_ATTEMPTS,
)
from cirrusmq_broker.services.dead_letters import (
    MAX_LIST,
    MAX_OFFSET,
    MAX_REDRIVE_IDS,
    MAX_REDRIVE_PER_CALL,
)
from pydantic import BaseModel, Field, StrictInt

from .schemas import AckResultBody, ReceiptHandleText, Strict


class NackRequest(Strict):
    receipt_handles: list[ReceiptHandleText] = Field(
        min_length=1, max_length=limits.MAX_ACK_HANDLES
    )
    delay_seconds: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_NACK_DELAY_SECONDS,
        description="Reconsume no earlier than this: the smallest backoff level (10s 30s 1m "
        "... 2h) of at least this delay. Default: the next level after the attempts so far.",
    )


class NackResponse(BaseModel):
    nacked: int = Field(description="How many handles were given back (now or before).")
    results: list[AckResultBody] = Field(
        description="One per handle, in request order; 'acked' means given back."
    )


class GroupSettingsRequest(Strict):
    max_delivery_attempts: StrictInt = Field(
        ge=MIN_MAX_DELIVERY_ATTEMPTS,
        le=MAX_MAX_DELIVERY_ATTEMPTS,
        description="Deliveries of a message before it goes to the group's dead-letter topic.",
    )


class GroupSettingsBody(BaseModel):
    group: str
    max_delivery_attempts: int


class DeadLetterBody(BaseModel):
    dlq_offset: int = Field(description="Its place in the group's dead-letter topic.")
    message_id: str
    origin_topic: str | None
    origin_queue: int | None
    origin_offset: int | None
    delivery_attempts: int = Field(description="Deliveries that failed.")
    reason: str | None
    stored_timestamp: int = Field(description="When it became a dead letter (ms).")
    born_timestamp: int
    tag: str | None
    keys: list[str]
    body_preview: str = Field(description="Base64 of the body's first 256 bytes.")
    body_bytes: int
    redriven: bool = Field(
        default=False, description="Sent back to its group by a redrive already."
    )


class DeadLetterList(BaseModel):
    group: str
    dead_letters: list[DeadLetterBody]
    next_start: int | None = Field(description="Pass as start for the next page (None: end).")


class RedriveRequest(Strict):
    topic: str | None = Field(None, description="Only dead letters of this original topic.")
    message_ids: list[str] | None = Field(None, min_length=1, max_length=MAX_REDRIVE_IDS)
    max_messages: StrictInt = Field(100, ge=1, le=MAX_REDRIVE_PER_CALL)
    start: StrictInt = Field(
        0, ge=0, le=MAX_OFFSET, description="A redrive by ids goes on from here (next_offset)."
    )


class RedriveBody(BaseModel):
    redriven: int
    skipped: int = Field(description="Dead letters whose topic no longer exists (kept).")
    next_offset: int
    done: bool = Field(description="Nothing left to redrive for now (else call again).")


class PurgeRequest(Strict):
    before: StrictInt | None = Field(
        None, ge=0, le=2**63 - 1, description="Default: every dead letter so far."
    )


class PurgeBody(BaseModel):
    floor: int = Field(description="Dead letters below this offset are gone from listings.")


LIST_LIMIT_MAX = MAX_LIST
