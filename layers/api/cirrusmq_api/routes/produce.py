"""Sending messages."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import InvalidRequest
from cirrusmq_broker.model import ProducerStamp

from ..convert import message_input
from ..schemas import SendReceiptBody, SendRequest, SendResponse

router = APIGatewayHttpRouter()


@router.post("/v1/topics/<topic>/messages", summary="Send a batch of messages")
def send_messages(topic: str, request: SendRequest) -> SendResponse:
    if (request.producer_id is None) != (request.sequence is None):
        raise InvalidRequest("producer_id and sequence go together")
    stamp = (
        ProducerStamp(request.producer_id, request.sequence)
        if request.producer_id is not None and request.sequence is not None
        else None
    )
    result = current_broker().produce.send(
        topic, [message_input(m, i) for i, m in enumerate(request.messages)], stamp
    )
    return SendResponse(
        receipts=[SendReceiptBody(**vars(r)) for r in result.receipts],
        duplicate=result.duplicate,
    )
