"""The pure part of an exactly-once step: what it is, what it answers, how it is planned
(outputs merged per topic, routed and split), its size, its stamp and its digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ... import limits
from ...errors import InvalidRequest
from ...model import MessageInput, NewMessage, SendReceipt, Topic
from ...rules.delays import delay_groups
from ...rules.transaction_state import check_id
from ...validation import check_group_name
from ..delays.schedule import delayed_receipt
from ..produce import request_digest

MAX_STEP_ITEMS = 100
"""DynamoDB TransactWriteItems' limit: one step is one transaction."""
STEP_FIXED_ITEMS = 2
"""The step's idempotency record and its producer's fence."""


@dataclass(frozen=True)
class Step:
    """One exactly-once step of a stage."""

    producer_group: str
    transactional_id: str
    epoch: int
    """The epoch the producer's registration answered: a newer one fences this step."""
    sequence: int
    """The step's number within the epoch: a retry of the step sends it again."""
    group: str
    """The consumer group the receipt handles were issued to."""
    receipt_handles: tuple[str, ...]
    """What the step acks."""
    outputs: tuple[tuple[str, tuple[MessageInput, ...]], ...]
    """(topic, messages) the step appends."""


@dataclass(frozen=True)
class StepResult:
    receipts: list[SendReceipt]
    """One per output message, in request order."""
    acked: int
    """Receipt handles acked."""
    duplicate: bool
    """True when the step was committed before (a retry): nothing was stored now."""


@dataclass(frozen=True)
class Output:
    """One output topic's messages, routed and split into those appended now and later."""

    topic: Topic
    inputs: list[MessageInput]
    messages: list[NewMessage]
    now_part: dict[int, list[NewMessage]]
    later: dict[int, list[tuple[NewMessage, int]]]

    def receipts(self, bases: dict[int, int]) -> list[SendReceipt]:
        """The receipts of the messages, given the base offset of each queue appended."""
        placed = {}
        for queue, ms in self.now_part.items():
            for i, m in enumerate(ms):
                placed[m.message_id] = SendReceipt(m.message_id, queue, bases[queue] + i)
        for queue, rows in self.later.items():
            placed.update((m.message_id, delayed_receipt(m, queue, due)) for m, due in rows)
        return [placed[m.message_id] for m in self.messages]


def step_producer_id(producer_group: str, transactional_id: str, epoch: int) -> str:
    """The producer id of a producer's steps: one per registration (epoch)."""
    key = f"{producer_group}#{transactional_id}#{epoch}"
    return "step." + hashlib.sha256(key.encode()).hexdigest()[:32]


def step_digest(step: Step) -> str:
    """A fingerprint of what the step acks and appends: a retry carries the same."""
    h = hashlib.sha256(json.dumps([step.group, list(step.receipt_handles)]).encode())
    for topic, inputs in step.outputs:
        h.update(request_digest(topic, inputs).encode())
    return h.hexdigest()


def recorded_digest(digest: str, streams: Sequence[tuple[str, int]]) -> str:
    """The digest the step's record keeps: its contents and the (topic, queue) each of its
    bases belongs to, in order. A retry routed to other queues (an output topic created
    again with another queue count) does not match: its record answers nothing of them."""
    return hashlib.sha256(json.dumps([digest, [list(s) for s in streams]]).encode()).hexdigest()


def check(step: Step) -> None:
    check_group_name(step.producer_group)
    check_id(step.transactional_id, "transactional id")
    check_group_name(step.group)
    if step.epoch < 1 or step.sequence < 0:
        raise InvalidRequest("a step needs the registration's epoch and a sequence >= 0")
    if len(step.receipt_handles) > limits.MAX_ACK_HANDLES:
        raise InvalidRequest(f"a step acks at most {limits.MAX_ACK_HANDLES} receipt handles")
    if not step.receipt_handles and not any(inputs for _, inputs in step.outputs):
        raise InvalidRequest("a step acks or sends something")


def merged(
    outputs: Sequence[tuple[str, Sequence[MessageInput]]],
) -> tuple[list[tuple[str, list[MessageInput]]], list[tuple[int, int]]]:
    """Outputs of the same topic together: (topic, messages) in order of first appearance,
    and per message of the request (topic's position, message's position in it)."""
    by_name: dict[str, list[MessageInput]] = {}
    order = []
    for name, inputs in outputs:
        if not inputs:
            continue
        into = by_name.setdefault(name, [])
        for m in inputs:
            order.append((list(by_name).index(name), len(into)))
            into.append(m)
    return list(by_name.items()), order


def in_order(receipts: list[list[SendReceipt]], order: list[tuple[int, int]]) -> list:
    return [receipts[t][i] for t, i in order]


def delay_items(output: Output) -> int:
    rows = sorted(
        ((queue, due) for queue, ms in output.later.items() for _, due in ms),
        key=lambda row: (row[0], row[1] // 1000),
    )
    return len(delay_groups(rows))
