"""Wire schemas of reads by offset, queue offsets and offset reset."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .schemas import MessageBody, Strict


class ReadResponse(BaseModel):
    topic: str
    queue: int
    requested_offset: int
    start_offset: int = Field(
        description="Where reading started: the requested offset, or the earliest retained "
        "offset above it when retention removed what lay between (then truncated is true)."
    )
    truncated: bool = Field(description="Offsets requested_offset..start_offset are expired.")
    next_offset: int = Field(description="The offset to read next (past filtered-out messages).")
    max_offset: int = Field(description="The queue's next offset (exclusive end of the log).")
    messages: list[MessageBody]


class FoundByKeyResponse(BaseModel):
    topic: str
    key: str
    messages: list[MessageBody] = Field(
        description="Newest first: stored time descending, then queue, then offset descending."
    )
    next_page_token: str | None = Field(
        description="Pass it as page_token for the next page; null: the search is complete. "
        "A page may hold fewer messages than the limit, even none, and still a token."
    )


class QueueOffsetBody(BaseModel):
    queue: int
    min_offset: int | None = Field(
        description="Earliest retained offset (null with include_min=false)."
    )
    max_offset: int = Field(description="Next offset to be written (exclusive).")
    timestamp_offset: int | None = Field(
        None,
        description="With ?timestamp=: the lowest offset stored at or after it (exact per "
        "message, from the index; max_offset when nothing is), never below min_offset.",
    )


class TopicOffsetsBody(BaseModel):
    topic: str
    timestamp: int | None = None
    queues: list[QueueOffsetBody]


class ResetOffsetsRequest(Strict):
    to: Literal["earliest", "latest", "timestamp", "offset"] = Field(
        description="earliest retained, latest (end of each queue), the first message stored "
        "at/after timestamp, or the given offsets of the given queues."
    )
    timestamp: int | None = Field(None, description="ms since the epoch (with to=timestamp).")
    offsets: dict[str, int] | None = Field(
        None, description='Queue -> offset (with to=offset), e.g. {"0": 120, "3": 0}.'
    )


class QueueResetBody(BaseModel):
    queue: int
    offset: int = Field(description="The group's cursor and committed offset now.")
    requested_offset: int
    min_offset: int
    max_offset: int
    truncated: bool = Field(
        description="Part of what was asked for is past retention: started at the earliest "
        "retained offset."
    )
    previous_committed: int
    previous_cursor: int
    dropped_leases: int = Field(description="Open leases dropped (their handles are stale).")


class ResetOffsetsResponse(BaseModel):
    group: str
    topic: str
    to: str
    timestamp: int | None = None
    queues: list[QueueResetBody]
    note: str | None = Field(None, description="Says which queues started at the earliest.")
