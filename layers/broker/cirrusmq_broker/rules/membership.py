"""A consumer group's members (registrations kept alive by heartbeats): pure rules.

A member is a client id with the topics it subscribes, whether it consumes orderly, and
an expiry: a heartbeat moves the expiry to now + its heartbeat timeout; a member past its
expiry is not live and every reader ignores it (the store prunes it on the next write and
DynamoDB's TTL removes the group's registry once every member expired).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import Conflict, InvalidRequest
from .allocation import allocate_averagely, assignment

CLIENT_ID_PATTERN = re.compile(r"[A-Za-z0-9@._:-]{1,128}")
DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 120
MIN_HEARTBEAT_TIMEOUT_SECONDS = 5
MAX_HEARTBEAT_TIMEOUT_SECONDS = 3600
MAX_MEMBERS = 500
"""Live members per group (keeps the group's registry item far under 400 KB)."""
MAX_MEMBER_TOPICS = 32


class InvalidClientId(InvalidRequest):
    code = "InvalidClientId"


class TooManyMembers(InvalidRequest):
    code = "TooManyMembers"


class ClientIdInUse(Conflict):
    """A live registration of the client id belongs to another access key."""

    code = "ClientIdInUse"


# --- registry size: the group's registry is one DynamoDB item (400 KB)
MAX_REGISTRY_BYTES = 350_000
"""What the members of one group's registry item may take (estimated): a registration that
would make it larger is refused (400 RegistryTooLarge) rather than failing the write."""
MEMBER_OVERHEAD_BYTES = 96
"""Attribute names and numbers of one member in the item (estimated)."""


class RegistryTooLarge(InvalidRequest):
    code = "RegistryTooLarge"


def member_bytes(member: Member) -> int:
    """About what ``member`` takes in the registry item."""
    topics = sum(len(t) + len(f) + 8 for t, f in member.topics.items())
    return len(member.client_id) + topics + MEMBER_OVERHEAD_BYTES


# --- end registry size


def check_client_id(client_id: str) -> str:
    if not CLIENT_ID_PATTERN.fullmatch(client_id):
        raise InvalidClientId(
            f"invalid client id {client_id[:140]!r}: use 1-128 characters of A-Z a-z 0-9 @ . _ : -"
        )
    return client_id


@dataclass(frozen=True)
class Member:
    client_id: str
    topics: dict[str, str]
    """Topic → filter it subscribes with."""
    orderly: bool
    last_heartbeat: int
    """Milliseconds since the epoch."""
    expires_at: int
    """Milliseconds since the epoch: not live from then on."""
    access_key: str | None = None
    """The access key that registered it (None: an admin key, or a registration older than
    ownership): while it is live, only that key (or an admin) may renew or remove it."""

    def live(self, now: int) -> bool:
        return self.expires_at > now

    def owned_by_another(self, access_key: str | None, now: int) -> bool:
        """Whether a caller signing with ``access_key`` (None: an admin) may not act for this
        registration: it is live and another key registered it."""
        return (
            access_key is not None
            and self.live(now)
            and self.access_key is not None
            and self.access_key != access_key
        )


@dataclass
class Membership:
    """The group's registry as read; ``version`` 0: not stored."""

    group: str
    members: dict[str, Member] = field(default_factory=dict)
    version: int = 0

    def live(self, now: int) -> list[Member]:
        return sorted((m for m in self.members.values() if m.live(now)), key=lambda m: m.client_id)

    def is_live(self, client_id: str | None, now: int) -> bool:
        member = self.members.get(client_id or "")
        return member is not None and member.live(now)

    def consumers_of(self, topic: str, now: int) -> list[str]:
        """Live members subscribed to ``topic``, sorted."""
        return [m.client_id for m in self.live(now) if topic in m.topics]

    def allocated(
        self, topic: str, queues: int, client_id: str | None, now: int
    ) -> list[int] | None:
        """The queues of ``topic`` allocated to ``client_id``; None when it is not a live
        member subscribed to ``topic`` (then no allocation applies to it)."""
        consumers = self.consumers_of(topic, now)
        if client_id is None or client_id not in consumers:
            return None
        return allocate_averagely(consumers, range(queues), client_id)

    def assignment(self, topic: str, queues: int, now: int) -> dict[str, list[int]]:
        return assignment(self.consumers_of(topic, now), list(range(queues)))

    def beat(self, member: Member, now: int) -> None:
        """Record ``member``'s heartbeat and drop members no longer live."""
        self.members = {cid: m for cid, m in self.members.items() if m.live(now)}
        self.members[member.client_id] = member
        if len(self.members) > MAX_MEMBERS:
            raise TooManyMembers(f"a group has at most {MAX_MEMBERS} live consumers")
        if sum(map(member_bytes, self.members.values())) > MAX_REGISTRY_BYTES:
            raise RegistryTooLarge(
                f"the registrations of group {self.group!r} would exceed "
                f"{MAX_REGISTRY_BYTES} bytes: subscribe fewer topics or shorter filters per "
                "consumer, or fewer consumers"
            )

    def leave(self, client_id: str, now: int) -> bool:
        """Remove ``client_id`` (and members no longer live); whether it was live."""
        was = self.is_live(client_id, now)
        self.members = {
            cid: m for cid, m in self.members.items() if m.live(now) and cid != client_id
        }
        return was

    def expires_at(self) -> int:
        """When the last member expires (ms): the registry's TTL."""
        return max((m.expires_at for m in self.members.values()), default=0)
