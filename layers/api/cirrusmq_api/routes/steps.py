"""Exactly-once consume -> produce steps: the acks of what a stage read and the messages it
produced, committed as one (docs/transactions.md)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker import limits
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.consume_produce import Step
from pydantic import BaseModel, Field

from ..access import current_principal, may_consume
from ..convert import message_input
from ..observability import count_acked, count_messages
from ..schemas import MessageIn, ReceiptHandleText, SendReceiptBody, Strict
from .transactions import EPOCH, ID

router = APIGatewayHttpRouter()


class StepOutput(Strict):
    topic: str = Field(..., min_length=1, max_length=127)
    messages: list[MessageIn] = Field(..., min_length=1)


class StepRequest(Strict):
    transactional_id: str = ID
    epoch: int = EPOCH
    sequence: int = Field(..., ge=0, le=2**63 - 1, description="The step's number in the epoch.")
    group: str = Field(..., min_length=1, max_length=127, description="The consumer group.")
    receipt_handles: list[ReceiptHandleText] = Field(
        default_factory=list, max_length=limits.MAX_ACK_HANDLES
    )
    outputs: list[StepOutput] = Field(default_factory=list)


class StepResponse(BaseModel):
    receipts: list[SendReceiptBody] = Field(description="One per output message, in order.")
    acked: int
    duplicate: bool = Field(description="True: committed before (a retry); nothing stored now.")


@router.post(
    "/v1/producer-groups/<producer_group>/steps",
    summary="Commit an exactly-once step: ack what was read and append what it produced",
)
def commit_step(producer_group: str, request: StepRequest) -> StepResponse:
    principal = current_principal()
    broker = current_broker()
    outputs = tuple(
        (
            o.topic,
            tuple(
                broker.large_bodies.resolve(
                    o.topic, [message_input(m, i) for i, m in enumerate(o.messages)]
                )
            ),
        )
        for o in request.outputs
    )
    result = broker.consume_produce.commit(
        Step(
            producer_group=producer_group,
            transactional_id=request.transactional_id,
            epoch=request.epoch,
            sequence=request.sequence,
            group=request.group,
            receipt_handles=tuple(request.receipt_handles),
            outputs=outputs,
        ),
        may_consume=may_consume(request.group),
        may_publish=principal.permissions.may_publish,
        access_key=None if principal.permissions.admin else principal.access_key,
        scope=principal.access_key,
    )
    count_messages(len(result.receipts))
    count_acked(result.acked)
    return StepResponse(
        receipts=[SendReceiptBody(**vars(r), scheduled=r.offset is None) for r in result.receipts],
        acked=result.acked,
        duplicate=result.duplicate,
    )
