"""Reads by offset straight from a queue's log, queue offsets, and group offset reset."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import InvalidRequest, QueueNotFound

from ..convert import message_body
from ..offset_schemas import (
    FoundByKeyResponse,
    QueueOffsetBody,
    QueueResetBody,
    ReadResponse,
    ResetOffsetsRequest,
    ResetOffsetsResponse,
    TopicOffsetsBody,
)

router = APIGatewayHttpRouter()
QUEUE_NUMBER = re.compile(r"[0-9]{1,6}")


def _queue_number(text: str) -> int:
    if not QUEUE_NUMBER.fullmatch(text):  # not isdigit(): "²" passes it, int() refuses it
        raise QueueNotFound(f"there is no queue {text[:40]!r}")
    return int(text)


@router.get(
    "/v1/topics/<topic>/queues/<queue>/messages",
    summary="Read messages by offset from one queue (no consumer group)",
)
def read_messages(
    topic: str,
    queue: str,
    offset: Annotated[int, Query(description="First offset to read.")],
    max_messages: Annotated[int, Query(description="1-1000.")] = 32,
    filter: Annotated[  # noqa: A002
        str, Query(description="TAG: '*' or 'TagA || TagB'; SQL92: a condition.")
    ] = "*",
    filter_type: Annotated[
        Literal["TAG", "SQL92"], Query(description="How `filter` is read.")
    ] = "TAG",
    wait_seconds: Annotated[float, Query(description="Long poll, 0-20 s.")] = 0,
) -> ReadResponse:
    result = current_broker().log_reader.read(
        topic,
        _queue_number(queue),
        offset,
        max_messages=max_messages,
        filter_expression=filter,
        filter_type=filter_type,
        wait_seconds=wait_seconds,
    )
    return ReadResponse(
        topic=result.topic,
        queue=result.queue,
        requested_offset=result.requested_offset,
        start_offset=result.start_offset,
        truncated=result.truncated,
        next_offset=result.next_offset,
        max_offset=result.max_offset,
        messages=[message_body(m) for m in result.messages],
    )


@router.get(
    "/v1/topics/<topic>/messages",
    summary="Find a topic's messages by key, newest first, a page at a time",
)
def find_by_key(
    topic: str,
    key: Annotated[str, Query(description="A message key (1-128 characters).")],
    begin: Annotated[int | None, Query(description="Stored at or after (ms).")] = None,
    end: Annotated[int | None, Query(description="Stored at or before (ms).")] = None,
    limit: Annotated[int, Query(description="Messages per page, 1-100.")] = 20,
    page_token: Annotated[str | None, Query(description="From the previous page.")] = None,
) -> FoundByKeyResponse:
    page = current_broker().key_lookup.find(
        topic, key, begin_ms=begin, end_ms=end, limit=limit, page_token=page_token
    )
    return FoundByKeyResponse(
        topic=topic,
        key=key,
        messages=[message_body(m) for m in page.messages],
        next_page_token=page.next_token,
    )


@router.get(
    "/v1/topics/<topic>/offsets",
    summary="Offsets of a topic's queues (min, max, and the offset for a timestamp)",
)
def topic_offsets(
    topic: str,
    queue: Annotated[int | None, Query(description="Only this queue.")] = None,
    timestamp: Annotated[int | None, Query(description="ms since the epoch.")] = None,
    include_min: Annotated[
        bool, Query(description="false: max offsets only (one read, no index query).")
    ] = True,
) -> TopicOffsetsBody:
    found = current_broker().log_reader.offsets(
        topic, queue=queue, timestamp_ms=timestamp, include_min=include_min
    )
    return TopicOffsetsBody(
        topic=topic, timestamp=timestamp, queues=[QueueOffsetBody(**vars(q)) for q in found]
    )


@router.post(
    "/v1/groups/<group>/offsets/<topic>/reset",
    summary="Reset a consumer group's offsets on a topic (rewind or skip ahead)",
)
def reset_offsets(group: str, topic: str, request: ResetOffsetsRequest) -> ResetOffsetsResponse:
    offsets = None
    if request.offsets is not None:
        offsets = {}
        for key, value in request.offsets.items():
            if not QUEUE_NUMBER.fullmatch(key):
                raise InvalidRequest(f"offsets: {key[:40]!r} is not a queue number")
            offsets[int(key)] = value
    result = current_broker().offset_reset.reset(
        group, topic, request.to, timestamp_ms=request.timestamp, offsets=offsets
    )
    return ResetOffsetsResponse(
        group=result.group,
        topic=result.topic,
        to=result.target.value,
        timestamp=result.timestamp,
        queues=[QueueResetBody(**vars(q)) for q in result.queues],
        note=result.note(),
    )
