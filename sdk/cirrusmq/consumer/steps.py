"""Exactly-once steps for :class:`~cirrusmq.PushConsumer` (``exactly_once=producer``).

The listener gets the message (or, with ``step_per_batch=True``, the delivered batch) and an
open :class:`~cirrusmq.ExactlyOnceStep` that already acks it; it adds what it produces with
``step.send``. A ``SUCCESS`` commits the step — the acks and the sends in one transaction —
instead of the consumer's own ack. An exception, a ``FAILURE`` or a refused commit (a lease
that moved on, a fenced producer, a step too large) drops it: nothing is sent or acked and
the messages come back as after any failure. A fenced producer (a newer instance registered
its ``transactional_id``, seen by this consumer or by any other user of the producer) or a
closed one opens no step: the consumer stops fetching and the messages it still holds are
failed without calling the listener.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ProducerFencedError
from ..message import ConsumeResult, MessageView

if TYPE_CHECKING:
    from ..transaction.exactly_once import ExactlyOnceProducer, ExactlyOnceStep

__all__ = ["BatchStepListener", "StepListener", "run_step"]

log = logging.getLogger("cirrusmq.push_consumer")

StepListener = Callable[[MessageView, "ExactlyOnceStep"], ConsumeResult]
"""Processes one message inside a step: ``listener(message, step)``."""
BatchStepListener = Callable[[list[MessageView], "ExactlyOnceStep"], ConsumeResult]
"""Processes a delivered batch inside one step: ``listener(messages, step)``."""


def run_step(
    producer: ExactlyOnceProducer,
    consumer: Any,
    messages: list[MessageView],
    listener: Callable[[Any, ExactlyOnceStep], ConsumeResult],
    argument: Any,
) -> ConsumeResult:
    """Call ``listener(argument, step)`` in a step acking ``messages``; ``SUCCESS`` only once
    the step committed (the messages are acked then), ``FAILURE`` otherwise (nothing of the
    step was stored). Raises :class:`~cirrusmq.errors.ProducerFencedError` once the producer
    is fenced and :class:`~cirrusmq.errors.ClientClosedError` once it is closed (no more step
    can commit: the caller stops taking messages); the listener is not called then."""
    if producer.fenced:
        raise ProducerFencedError(
            f"producer {producer.transactional_id!r} was fenced: a newer instance registered",
            code="ProducerFenced",
            http_status=409,
        )
    step = producer.exactly_once(consumer)  # ClientClosedError: closed
    try:
        for message in messages:
            step.ack(message)
        result = listener(argument, step)
    except Exception:
        log.exception("step of %d message(s) failed before its commit: dropped", len(messages))
        result = ConsumeResult.FAILURE
    if result is not ConsumeResult.SUCCESS:
        if result is not ConsumeResult.FAILURE:
            log.warning("listener returned %r, not a ConsumeResult: FAILURE", result)
        step.abort()
        return ConsumeResult.FAILURE
    try:
        step.commit()
    except ProducerFencedError:
        step.abort()
        raise
    except Exception as error:  # refused or unreachable: the messages come back
        log.warning("step of %d message(s) not committed: %s", len(messages), error)
        step.abort()
        return ConsumeResult.FAILURE
    return ConsumeResult.SUCCESS
