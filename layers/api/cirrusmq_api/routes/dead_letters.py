"""Group settings (max delivery attempts) and the group's dead letters."""

from __future__ import annotations

import base64
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.dead_letters import MAX_OFFSET, PREVIEW_BYTES, DeadLetter

from ..retry_schemas import (
    DeadLetterBody,
    DeadLetterList,
    GroupSettingsBody,
    GroupSettingsRequest,
    PurgeBody,
    PurgeRequest,
    RedriveBody,
    RedriveRequest,
)

router = APIGatewayHttpRouter()


@router.put("/v1/groups/<group>", summary="Change a group's settings (max delivery attempts)")
def update_group(group: str, request: GroupSettingsRequest) -> GroupSettingsBody:
    value = current_broker().retries.set_max_delivery_attempts(group, request.max_delivery_attempts)
    return GroupSettingsBody(group=group, max_delivery_attempts=value)


@router.get("/v1/groups/<group>/dead-letters", summary="List a group's dead letters")
def list_dead_letters(
    group: str,
    topic: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    start: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> DeadLetterList:
    page = current_broker().dead_letters.list(group, topic=topic, limit=limit, start=start)
    return DeadLetterList(
        group=group,
        dead_letters=[_body(d) for d in page.dead_letters],
        next_start=page.next_start,
    )


@router.post(
    "/v1/groups/<group>/dead-letters/redrive",
    summary="Send dead letters back to their group only (resumable: call until done)",
)
def redrive_dead_letters(group: str, request: RedriveRequest) -> RedriveBody:
    result = current_broker().dead_letters.redrive(
        group,
        topic=request.topic,
        message_ids=request.message_ids,
        max_messages=request.max_messages,
        start=request.start,
    )
    return RedriveBody(**vars(result))


@router.post("/v1/groups/<group>/dead-letters/purge", summary="Drop a group's dead letters")
def purge_dead_letters(group: str, request: PurgeRequest) -> PurgeBody:
    return PurgeBody(floor=current_broker().dead_letters.purge(group, before=request.before))


def _body(dead: DeadLetter) -> DeadLetterBody:
    m, system = dead.message, dead.message.system
    return DeadLetterBody(
        dlq_offset=dead.offset,
        message_id=m.message_id,
        origin_topic=system.origin_topic,
        origin_queue=system.origin_queue,
        origin_offset=system.origin_offset,
        delivery_attempts=system.reconsume_count,
        reason=system.dead_letter_reason,
        stored_timestamp=m.stored_timestamp,
        born_timestamp=m.born_timestamp,
        tag=m.tag,
        keys=list(m.keys),
        body_preview=base64.b64encode(m.body[:PREVIEW_BYTES]).decode(),
        body_bytes=len(m.body),
        redriven=dead.redriven,
    )
