"""Nack ("reconsume later"): give received messages back to the retry topic."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.delivery import AckStatus

from ..access import may_consume
from ..convert import ack_result_body
from ..observability import count_messages
from ..retry_schemas import NackRequest, NackResponse

router = APIGatewayHttpRouter()


@router.post(
    "/v1/groups/<group>/nack",
    summary="Give messages back: redelivered after a backoff (or to the dead-letter topic)",
)
def nack(group: str, request: NackRequest) -> NackResponse:
    outcomes = current_broker().retries.nack(
        group, request.receipt_handles, request.delay_seconds, may_consume(group)
    )
    nacked = sum(o.status is AckStatus.ACKED for o in outcomes)
    count_messages(nacked)
    return NackResponse(
        nacked=nacked,
        results=[ack_result_body(o) for o in outcomes],
    )
