"""Exactly-once consume -> produce steps: :class:`ConsumeProduceSteps` (the service, in
:mod:`.service`) and the pure planning of a step (:mod:`.plan`)."""

from __future__ import annotations

from .plan import MAX_STEP_ITEMS, Step, StepResult, step_digest, step_producer_id
from .service import ConsumeProduceSteps

__all__ = [
    "MAX_STEP_ITEMS",
    "ConsumeProduceSteps",
    "Step",
    "StepResult",
    "step_digest",
    "step_producer_id",
]
