"""Receiving, acking, changing invisible duration, and looking messages up."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.delivery.response_size import json_text_bytes

from ..access import (
    acting_key,
    claim_request,
    current_principal,
    may_consume,
    visible_trace_events,
)
from ..convert import ack_result_body, message_body, received_body
from ..observability import count_acked, count_messages
from ..schemas import (
    AckRequest,
    AckResponse,
    ChangeInvisibleRequest,
    ChangeInvisibleResponse,
    MessageBody,
    ReceiveRequest,
    ReceiveResponse,
    SubscriptionBody,
    SubscriptionRequest,
    TraceBody,
)

router = APIGatewayHttpRouter()


@router.get("/v1/topics/<topic>/messages/<message_id>", summary="Look a message up by id")
def lookup_message(topic: str, message_id: str) -> MessageBody:
    message_id = unquote(message_id)  # ':' may come as %3A
    caller = current_principal().access_key
    return message_body(current_broker().lookup.lookup(topic, message_id, access_key=caller))


@router.get(
    "/v1/topics/<topic>/messages/<message_id>/trace",
    summary="A message's trace events, in time order (topics with trace on)",
)
def trace_message(topic: str, message_id: str) -> TraceBody:
    message_id = unquote(message_id)  # ':' may come as %3A
    caller = current_principal().access_key
    events = current_broker().trace_reader.trace_message(topic, message_id, access_key=caller)
    return TraceBody(topic=topic, message_id=message_id, events=visible_trace_events(topic, events))


@router.post("/v1/groups/<group>/receive", summary="Receive messages as a consumer group")
def receive(group: str, request: ReceiveRequest) -> ReceiveResponse:
    acks: list[AckResponse] = []
    due: list[int] = []  # when nothing was delivered: when to look again

    def ack_first() -> int:
        """The riding handles, acked through the ack route's own path once the receive is
        checked: an error there (a retriable one included) fails the request before
        anything is leased, so a retry repeats both. Returns the bytes their results take."""
        acks.append(settle(group, request.ack))
        return json_text_bytes(acks[0].model_dump_json())

    if request.ack is not None:  # a mistake in it refuses the receive before it stores anything
        current_broker().consume.check_ack(group, request.ack, may_consume(group))
    received = current_broker().consume.receive(
        group,
        request.topic,
        filter_expression=request.filter,
        filter_type=request.filter_type,
        max_messages=request.max_messages,
        invisible_seconds=request.invisible_seconds,
        wait_seconds=request.wait_seconds,
        client_id=request.client_id,
        access_key=acting_key(),
        before_receive=None if request.ack is None else ack_first,
        due_hint=due.append,
    )
    count_messages(len(received))  # a receive counts what it delivers, not what it acked
    return ReceiveResponse(
        messages=[received_body(r) for r in received],
        acks=acks[0] if acks else None,
        next_due_ms=due[0] if due else None,
    )


@router.post("/v1/groups/<group>/ack", summary="Ack received messages (a result per handle)")
def ack(group: str, request: AckRequest) -> AckResponse:
    response = settle(group, request.receipt_handles)
    count_messages(response.acked)
    return response


def settle(group: str, receipt_handles: list[str]) -> AckResponse:
    """Ack ``receipt_handles`` as ``group``: what the ack route does, and a receive's ``ack``.

    Per handle: the caller's permission on its topic (``may_consume``), one result in request
    order. The request's nonce is claimed before anything but a whole-lease delete (a
    receive's nonce is claimed before its route runs, so there it is claimed already).
    """
    outcomes = current_broker().consume.ack(
        group, receipt_handles, may_consume(group), before_slow_path=claim_request
    )
    acked = sum(o.status == "acked" for o in outcomes)
    count_acked(acked)
    return AckResponse(
        acked=acked,
        results=[ack_result_body(o) for o in outcomes],
    )


@router.put(
    "/v1/groups/<group>/subscriptions/<topic>",
    summary="Set the group's filter on a topic (applies from the group's cursor on)",
)
def subscribe(group: str, topic: str, request: SubscriptionRequest) -> SubscriptionBody:
    subscription = current_broker().consume.subscribe(
        group, topic, request.filter, request.filter_type
    )
    return SubscriptionBody(
        group=group,
        topic=topic,
        filter=subscription.expression,
        filter_type=subscription.filter_type,
    )


@router.post("/v1/groups/<group>/invisible", summary="Change a message's invisible duration")
def change_invisible(group: str, request: ChangeInvisibleRequest) -> ChangeInvisibleResponse:
    received = current_broker().consume.change_invisible(
        group, request.receipt_handle, request.invisible_seconds, may_consume(group)
    )
    return ChangeInvisibleResponse(
        receipt_handle=received.receipt_handle, invisible_until=received.invisible_until
    )
