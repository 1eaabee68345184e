"""Transactional messages: register a producer, half sends, verdicts, check polls, operators."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker import limits
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.rules.transaction_state import (
    MAX_IMMUNITY_SECONDS,
    MAX_INTERVAL_SECONDS,
    MAX_MAX_CHECKS,
    MAX_PARTS,
    CheckTimings,
    Resolution,
    Transaction,
)
from cirrusmq_broker.services.transactions.checks import MAX_CHECKS_PER_POLL
from pydantic import BaseModel, Field

from ..access import current_principal
from ..convert import message_fields, message_input
from ..schemas import MessageBody, MessageIn, Strict, documented_range

router = APIGatewayHttpRouter()

EPOCH = Field(..., ge=1, le=2**63 - 1, description="The epoch registration answered.")
ID = Field(..., min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]{1,128}$")


class RegisterProducerRequest(Strict):
    transactional_id: str = ID


class RegisterProducerResponse(BaseModel):
    producer_group: str
    transactional_id: str
    epoch: int = Field(description="Send it with every transactional call; a newer one fences.")


class HalfSendRequest(Strict):
    topic: str = Field(..., min_length=1, max_length=127)
    transactional_id: str = ID
    epoch: int = EPOCH
    part: int = Field(0, ge=0, lt=MAX_PARTS, description="0, 1, 2... per send of the txn.")
    messages: list[MessageIn]
    check_immunity_seconds: int | None = Field(None, ge=0, le=MAX_IMMUNITY_SECONDS)
    check_interval_seconds: int | None = Field(None, ge=1, le=MAX_INTERVAL_SECONDS)
    max_checks: int | None = Field(None, ge=1, le=MAX_MAX_CHECKS)


class HalfReceiptBody(BaseModel):
    message_id: str
    queue: int


class HalfSendResponse(BaseModel):
    transaction_id: str
    receipts: list[HalfReceiptBody]
    duplicate: bool = Field(description="This part was stored before (a retried send).")


class EndRequest(Strict):
    resolution: Literal["COMMIT", "ROLLBACK", "UNKNOWN"]
    transactional_id: str = ID
    epoch: int = EPOCH
    check: bool = Field(False, description="An answer to a check request.")


class ResolveRequest(Strict):
    resolution: Literal["COMMIT", "ROLLBACK"]


class EndResponse(BaseModel):
    transaction_id: str
    state: str = Field(description="OPEN, COMMITTED or ROLLED_BACK (after this call).")
    changed: bool = Field(description="False: the verdict was applied before (a no-op).")
    reason: str | None = None


class PollChecksRequest(Strict):
    transactional_id: str = ID
    epoch: int = EPOCH
    wait_seconds: float = Field(0, **documented_range(0, limits.MAX_WAIT_SECONDS))
    max_checks: int = Field(10, ge=1, le=MAX_CHECKS_PER_POLL)


class CheckRequestBody(BaseModel):
    producer_group: str
    transaction_id: str
    transactional_id: str = Field(description="The producer that opened the transaction.")
    topic: str
    check_number: int
    message_count: int
    message: MessageBody = Field(description="The first half message (offset -1).")


class PollChecksResponse(BaseModel):
    checks: list[CheckRequestBody]


class TransactionBody(BaseModel):
    producer_group: str
    transaction_id: str
    transactional_id: str
    epoch: int
    topic: str
    state: str
    created_timestamp: int
    age_seconds: float
    message_count: int
    checks: int = Field(description="Check requests published so far.")
    max_checks: int
    next_check_timestamp: int | None
    end_reason: str | None = None
    ended_by: str | None = None
    check_failures: int = Field(0, description="Checker passes in a row that failed on it.")
    last_error: str | None = Field(None, description="The last such failure.")


class TransactionListBody(BaseModel):
    transactions: list[TransactionBody]


@router.post(
    "/v1/producer-groups/<producer_group>/producers",
    summary="Register a transactional producer: a new epoch fences older instances",
)
def register_producer(
    producer_group: str, request: RegisterProducerRequest
) -> RegisterProducerResponse:
    principal = current_principal()
    epoch = current_broker().transactions.register(
        producer_group,
        request.transactional_id,
        access_key=principal.access_key,
        admin=principal.permissions.admin,
    )
    return RegisterProducerResponse(
        producer_group=producer_group, transactional_id=request.transactional_id, epoch=epoch
    )


@router.post(
    "/v1/producer-groups/<producer_group>/transactions/<transaction_id>/messages",
    summary="Send half messages in a transaction (invisible until committed)",
)
def send_half_messages(
    producer_group: str, transaction_id: str, request: HalfSendRequest
) -> HalfSendResponse:
    defaults = CheckTimings()
    timings = CheckTimings(
        request.check_immunity_seconds
        if request.check_immunity_seconds is not None
        else defaults.immunity_seconds,
        request.check_interval_seconds
        if request.check_interval_seconds is not None
        else defaults.interval_seconds,
        request.max_checks if request.max_checks is not None else defaults.max_checks,
    )
    result = current_broker().transactions.send(
        producer_group,
        transaction_id,
        transactional_id=request.transactional_id,
        epoch=request.epoch,
        topic_name=request.topic,
        inputs=current_broker().large_bodies.resolve(
            request.topic, [message_input(m, i) for i, m in enumerate(request.messages)]
        ),
        part=request.part,
        timings=timings,
        access_key=_owner_key(),
    )
    return HalfSendResponse(
        transaction_id=result.transaction_id,
        receipts=[HalfReceiptBody(message_id=r.message_id, queue=r.queue) for r in result.receipts],
        duplicate=result.duplicate,
    )


@router.post(
    "/v1/producer-groups/<producer_group>/transactions/<transaction_id>/end",
    summary="End a transaction (COMMIT / ROLLBACK) or answer a check (also UNKNOWN)",
)
def end_transaction(producer_group: str, transaction_id: str, request: EndRequest) -> EndResponse:
    result = current_broker().transactions.end(
        producer_group,
        transaction_id,
        Resolution(request.resolution),
        producer=(request.transactional_id, request.epoch),
        by="check" if request.check else "producer",
        allowed=current_principal().permissions.may_publish,
        access_key=_owner_key(),
        readable=current_principal().permissions.may_subscribe_topic,
    )
    return EndResponse(
        transaction_id=result.transaction_id,
        state="COMMITTED" if result.state.value == "COMMITTING" else result.state.value,
        changed=result.changed,
        reason=result.reason,
    )


@router.post(
    "/v1/producer-groups/<producer_group>/checks",
    summary="Long poll for check requests about the group's undecided transactions",
)
def poll_checks(producer_group: str, request: PollChecksRequest) -> PollChecksResponse:
    checks = current_broker().transactions.poll_checks(
        producer_group,
        request.transactional_id,
        request.epoch,
        wait_seconds=request.wait_seconds,
        max_checks=request.max_checks,
        access_key=_owner_key(),
        allowed=current_principal().permissions.may_publish,
        readable=current_principal().permissions.may_subscribe_topic,
    )
    return PollChecksResponse(
        checks=[
            CheckRequestBody(
                producer_group=c.producer_group,
                transaction_id=c.transaction_id,
                transactional_id=c.transactional_id,
                topic=c.topic,
                check_number=c.check_number,
                message_count=c.message_count,
                message=MessageBody(**message_fields(c.message)),
            )
            for c in checks
        ]
    )


@router.get(
    "/v1/producer-groups/<producer_group>/transactions",
    summary="Operators: the group's undecided transactions (age, checks so far, topic)",
)
def list_open_transactions(producer_group: str) -> TransactionListBody:
    broker = current_broker()
    now = broker.clock()
    return TransactionListBody(
        transactions=[_body(t, now) for t in broker.transactions.list_open(producer_group)]
    )


@router.get(
    "/v1/producer-groups/<producer_group>/transactions/<transaction_id>",
    summary="Operators: one transaction, open or ended (with the reason it ended)",
)
def describe_transaction(producer_group: str, transaction_id: str) -> TransactionBody:
    broker = current_broker()
    return _body(broker.transactions.describe(producer_group, transaction_id), broker.clock())


@router.post(
    "/v1/producer-groups/<producer_group>/transactions/<transaction_id>/resolve",
    summary="Operators: commit or roll back an undecided transaction by hand",
)
def resolve_transaction(
    producer_group: str, transaction_id: str, request: ResolveRequest
) -> EndResponse:
    result = current_broker().transactions.end(
        producer_group, transaction_id, Resolution(request.resolution), by="operator"
    )
    return EndResponse(
        transaction_id=result.transaction_id,
        state="COMMITTED" if result.state.value == "COMMITTING" else result.state.value,
        changed=result.changed,
        reason=result.reason,
    )


def _owner_key() -> str | None:
    """The caller's key, which must be the one that registered the transactional id
    (None for an admin: it may act for any registration)."""
    principal = current_principal()
    return None if principal.permissions.admin else principal.access_key


def _body(txn: Transaction, now: int) -> TransactionBody:
    return TransactionBody(
        producer_group=txn.producer_group,
        transaction_id=txn.transaction_id,
        transactional_id=txn.transactional_id,
        epoch=txn.epoch,
        topic=txn.topic,
        state=txn.state.value,
        created_timestamp=txn.created_at,
        age_seconds=max(0, now - txn.created_at) / 1000,
        message_count=txn.message_count,
        checks=txn.checks,
        max_checks=txn.timings.max_checks,
        next_check_timestamp=txn.next_check_at,
        end_reason=txn.end_reason,
        ended_by=txn.ended_by,
        check_failures=txn.check_failures,
        last_error=txn.last_error,
    )
