"""The reference model: what was sent, acked, dead-lettered and redriven, and the rules a
delivery, an ack or a dead letter must follow. Violations are raised as typed errors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

INVARIANTS = {
    "unsent-delivered": "nothing delivered that was not sent",
    "early": "nothing delivered before its delivery time",
    "acked-redelivered": "a message acked (ack answered acked) is never delivered again",
    "stale-ack-acked": "an ack of a handle whose message was redelivered since answers expired",
    "redelivered-while-invisible": "redelivery only after the lease expired or a nack",
    "attempt-not-counted": "each redelivery counts one more delivery attempt",
    "delivered-after-dead-letter": "a dead letter is not delivered unless redriven",
    "dlq-duplicate": "a message is in its group's DLQ once (per redrive at most once more)",
    "redrive-duplicate": "a redrive sends a letter back at most once",
    "offset-backwards": "committed offsets never go backwards (but by a reset)",
    "reset-handle-acked": "a handle leased on a topic before an offset reset of it to earliest "
    "answered acks nothing after, while its message is not delivered or acked again (the "
    "reset dropped its lease)",
    "fifo-order": "FIFO: a message is delivered only after the earlier ones of its group settled",
    "rolled-back-visible": "a rolled-back (or never committed) transaction part is never visible",
    "cancelled-delivered": "a cancelled delayed message is never delivered",
    "moved-after-cancel": "a message move task moves nothing after its cancel answered",
    "purged-delivered": "a message sent to an SQS queue before its purge is never delivered after",
    "sqs-delete": "an SQS FIFO delete through a message's latest handle is done exactly "
    "within its visibility timeout",
    "sqs-visibility": "an SQS FIFO visibility change through a message's latest handle "
    "within its visibility timeout is done",
    "sqs-stall": "an SQS FIFO message whose group has nothing in flight or undeleted before "
    "it is received without waiting for another group",
    "stored-twice": "every acknowledged send is stored exactly once",
    "lost": "every acknowledged send is acked, dead-lettered or still deliverable",
    "internal-error": "no unexpected error when no fault was injected",
}


class Violation(AssertionError):
    """An invariant broke; ``kind`` names it (one subclass per kind, so that hypothesis
    shrinks each kind on its own)."""

    kind = "violation"


_KINDS: dict[str, type[Violation]] = {}


def violation_type(kind: str) -> type[Violation]:
    if kind not in _KINDS:
        name = "Violation_" + kind.replace("-", "_")
        _KINDS[kind] = type(name, (Violation,), {"kind": kind})
    return _KINDS[kind]


@dataclass
class Msg:
    """One message the model sent."""

    body: bytes
    topic: str
    message_id: str
    status: str
    """certain (send answered), maybe (the send failed: stored at most once), pending (a
    stamped send that failed, to be resent), half, committed, maybe-committed, rolled-back,
    cancelled, maybe-cancelled."""
    due: int = 0
    group_key: str | None = None
    fifo_seq: int | None = None
    """Order within its message group (FIFO), when its send answered at first attempt."""
    txn: str | None = None

    @property
    def required(self) -> bool:
        """Must end acked, dead-lettered or deliverable."""
        return self.status in ("certain", "committed")

    @property
    def may_show(self) -> bool:
        return self.status in (
            "certain",
            "maybe",
            "pending",
            "committed",
            "maybe-committed",
            "maybe-cancelled",
        )


@dataclass
class Delivery:
    body: bytes
    topic: str
    handle: str
    attempt: int
    deadline: int
    step: int = 0
    """When it was delivered (the history's step)."""
    retired: bool = False
    """Superseded by change_invisible or ended by a nack: not acked, nacked or changed again."""
    via_allowance: bool = False
    """A copy a redrive sent back."""
    copy: tuple = ()
    """Which copy of the message: where it was first stored."""
    lease: tuple | None = None
    """FIFO: (topic, queue, lease id) it is leased under; change_invisible and a nack of one
    message move the deadline of its whole delivery (every message of the lease)."""


@dataclass
class GroupModel:
    name: str
    topics: tuple[str, ...]
    acked: set[bytes] = field(default_factory=set)
    maybe_acked: set[bytes] = field(default_factory=set)
    step_maybe_acked: set[bytes] = field(default_factory=set)
    """Messages of exactly-once steps that failed and are not retried to an answer yet:
    their acks may have landed (in ``maybe_acked`` too, until the steps answer)."""
    visible_at: dict[bytes, int] = field(default_factory=dict)
    """Not deliverable again before this (ms): the known lease's deadline."""
    last_attempt: dict[bytes, int] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    latest: dict[bytes, Delivery] = field(default_factory=dict)
    dead: set[bytes] = field(default_factory=set)
    """Bodies with a letter in the DLQ not redriven."""
    dead_ever: set[bytes] = field(default_factory=set)
    letter_bodies: dict[int, bytes] = field(default_factory=dict)
    """DLQ offset of each dead letter seen → its body."""
    letter_seen: dict[bytes, int] = field(default_factory=dict)
    """Body → the step its latest letter was first seen."""
    copy_letter_seen: dict[tuple, int] = field(default_factory=dict)
    """Copy → the step its first letter was first seen."""
    allowance: Counter[bytes] = field(default_factory=Counter)
    """Extra deliveries redrives of this group's dead letters may still make (a redrive
    reaches no other group)."""
    granted: Counter[bytes] = field(default_factory=Counter)
    """Letters of this group redrives sent back, in all."""
    acked_copies: set[tuple] = field(default_factory=set)
    dead_copies: set[tuple] = field(default_factory=set)
    letter_copies: dict[int, tuple] = field(default_factory=dict)
    """DLQ offset of each dead letter seen → its copy."""
    copy_attempt: dict[tuple, int] = field(default_factory=dict)
    copy_visible_at: dict[tuple, int] = field(default_factory=dict)
    """Per copy (``Delivery.copy``): checked instead of the per-message state once a
    redrive gave the group another copy of the message."""
    exempt: set[bytes] = field(default_factory=set)
    """Rewound by an offset reset: redelivery rules do not apply to them any more."""
    excused: set[bytes] = field(default_factory=set)
    """Skipped by an offset reset to latest: not required any more."""
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    reset_at: dict[str, int] = field(default_factory=dict)
    """Topic → the step an offset reset of it to earliest that answered ok started at: the
    leases on its queues delivered by then are dropped (and their offsets not committed)."""
    reset_dropped: set[str] = field(default_factory=set)
    """Handles delivered while a reset ran, on a queue it had not written yet: dropped."""
    rewound: dict[str, set[int]] = field(default_factory=dict)
    """Topic → the queues an offset reset paused part-way has written: what a receive gets
    from them in place is delivered anew (attempt 1 on a NORMAL topic), so the redelivery
    rules do not apply to it."""


@dataclass
class Txn:
    txid: str
    state: str = "open"
    """open, committed, maybe-committed, rolled-back."""
    parts: dict[int, list[bytes]] = field(default_factory=dict)
    next_part: int = 0
    failed_parts: set[int] = field(default_factory=set)
    """Parts whose send failed (each may or may not be stored): resent with the same
    messages."""
