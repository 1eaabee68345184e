"""Sending messages."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import InvalidRequest
from cirrusmq_broker.model import ProducerStamp

from ..access import claim_request, current_principal
from ..convert import message_input
from ..observability import count_messages
from ..schemas import SendReceiptBody, SendRequest, SendResponse

router = APIGatewayHttpRouter()


@router.post("/v1/topics/<topic>/messages", summary="Send a batch of messages")
def send_messages(topic: str, request: SendRequest) -> SendResponse:
    if (request.producer_id is None) != (request.sequence is None):
        raise InvalidRequest("producer_id and sequence go together")
    stamp = (
        ProducerStamp(request.producer_id, request.sequence, current_principal().access_key)
        if request.producer_id is not None and request.sequence is not None
        else None
    )
    if stamp is None:  # a replay would store the messages again (a stamped one is answered
        claim_request()  # from the producer record)
    result = current_broker().produce.send(
        topic, [message_input(m, i) for i, m in enumerate(request.messages)], stamp
    )
    count_messages(len(result.receipts))
    return SendResponse(
        receipts=[SendReceiptBody(**vars(r), scheduled=r.offset is None) for r in result.receipts],
        duplicate=result.duplicate,
    )


# ---------------------------------------------------------------- delayed messages
@router.delete(
    "/v1/topics/<topic>/scheduled/<message_id>",
    summary="Cancel a scheduled (delayed) message before it is due",
)
def cancel_scheduled(  # noqa: ANN201 (204, no body)
    topic: str,
    message_id: str,
    delivery_timestamp: Annotated[int | None, Query()] = None,
):
    """Idempotent. ``delivery_timestamp`` is the due time from the send receipt; 409
    AlreadyDelivered once it was due and delivered, 404 ScheduledMessageNotFound."""
    if delivery_timestamp is None:
        raise InvalidRequest("delivery_timestamp (the send receipt's due time) is required")
    current_broker().delay_cancel.cancel(topic, unquote(message_id), delivery_timestamp)
    return Response(204, None, body=None)
