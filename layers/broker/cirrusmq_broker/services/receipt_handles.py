"""Receipt handles as a consumer sends them back (ack, nack, change_invisible): decoded for
one group and sorted by the lease they name; handles made for a delivery; and what an ack
or a nack did with each handle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ..errors import (
    AccessDenied,
    BrokerError,
    ForeignReceiptHandle,
    InvalidReceiptHandle,
    ReceiptHandleExpired,
)
from ..model import ReceivedMessage, StoredMessage
from ..rules.group_state import GroupQueueState, Lease
from ..rules.receipts import ReceiptHandle, ReceiptSigner

LeaseKey = tuple[str, int, str]
"""(topic, queue, lease id): the lease a handle was issued under."""


class AckStatus(StrEnum):
    ACKED = "acked"
    """Settled now or before (acking an acked message succeeds); for a nack: given back."""
    EXPIRED = "expired"
    """The lease ended (the message was or will be delivered again): it was not acked."""
    INVALID = "invalid"
    """Forged, corrupt, or another group's handle."""


@dataclass(frozen=True)
class AckOutcome:
    """What an ack did with one receipt handle."""

    receipt_handle: str
    status: AckStatus
    error: BrokerError | None = None


@dataclass(frozen=True)
class NackOutcome(AckOutcome):
    """What a nack did with one receipt handle: ``acked`` means given back (the handle is
    done; the message comes back after its backoff), else ``expired`` or ``invalid`` as for
    an ack."""


def moved_on(text: str) -> AckOutcome:
    """The handle's lease expired (or was nacked) and its message was moved on: the ack
    is stale, the message comes back from the retry topic (or sits in the DLQ)."""
    return AckOutcome(
        text,
        AckStatus.EXPIRED,
        ReceiptHandleExpired("the receipt handle is stale: the message will be delivered again"),
    )


def denied(group: str, topic: str) -> str:
    """The message of the AccessDenied for a handle of a topic the caller may not consume."""
    return f"access denied: this access key may not consume topic {topic} as group {group}"


class ReceiptHandles:
    """Encodes handles for deliveries and decodes the ones consumers send back."""

    def __init__(self, signer: Callable[[], ReceiptSigner]) -> None:
        self._make_signer = signer
        self._signer: ReceiptSigner | None = None

    def signer(self) -> ReceiptSigner:
        """Built on first use: a process that never reads or makes handles needs no secret."""
        if self._signer is None:
            self._signer = self._make_signer()
        return self._signer

    def decode(self, group: str, text: str) -> ReceiptHandle:
        """The handle ``text`` names; InvalidReceiptHandle if forged or corrupt,
        ForeignReceiptHandle if it is another group's."""
        handle = self.signer().decode(text)
        if handle.group != group:
            raise ForeignReceiptHandle("the receipt handle belongs to another consumer group")
        return handle

    def by_lease(
        self,
        group: str,
        texts: list[str],
        may_consume: Callable[[str], bool] | None = None,
    ) -> tuple[dict[int, BrokerError], dict[LeaseKey, dict[int, ReceiptHandle]]]:
        """Decode ``texts``: (position → why it is invalid, lease → position → handle).
        ``may_consume(topic)`` (the caller's permission): a handle of a topic it refuses is
        invalid (AccessDenied)."""
        invalid: dict[int, BrokerError] = {}
        leases: dict[LeaseKey, dict[int, ReceiptHandle]] = {}
        for position, text in enumerate(texts):
            try:
                handle = self.decode(group, text)
            except (InvalidReceiptHandle, ForeignReceiptHandle) as exc:
                invalid[position] = exc
                continue
            if may_consume is not None and not may_consume(handle.topic):
                invalid[position] = AccessDenied(denied(group, handle.topic))
                continue
            key = (handle.topic, handle.queue, handle.lease_id)
            leases.setdefault(key, {})[position] = handle
        return invalid, leases

    def received(
        self, state: GroupQueueState, message: StoredMessage, lease: Lease, *, traced: bool = False
    ) -> ReceivedMessage:
        """``message`` as delivered under ``lease``, with its signed handle (``traced``: of a
        topic with message trace on)."""
        handle = ReceiptHandle(
            state.group,
            state.topic,
            state.queue,
            message.offset,
            lease.lease_id,
            lease.attempt,
            lease.deadline,
            traced,
        )
        encoded = self.signer().encode(handle)
        return ReceivedMessage(message, encoded, lease.attempt, lease.deadline)
