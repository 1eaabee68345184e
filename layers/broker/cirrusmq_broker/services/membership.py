"""Consumer registration: heartbeats, deregistration (which releases queue locks at once),
and the group's live consumers with their queues.

Rules live in membership.py (who is live), allocation.py (who gets which queue) and
orderly.py (locks); this module reads and writes them through the consumer registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import AccessDenied, InvalidDuration, InvalidRequest, TopicNotFound
from ..model import MessageType
from ..rules.filters import parse_filter
from ..rules.membership import (
    DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
    MAX_HEARTBEAT_TIMEOUT_SECONDS,
    MAX_MEMBER_TOPICS,
    MIN_HEARTBEAT_TIMEOUT_SECONDS,
    ClientIdInUse,
    Member,
    Membership,
    check_client_id,
)
from ..storage.consumer_registry import ConsumerRegistry
from ..validation import check_group_name, check_topic_name
from . import optimistic
from .optimistic import CONFLICT
from .topic_catalog import TopicCatalog

SAVE_ATTEMPTS = 8
"""Attempts a registry update makes: every member of a group heartbeats into one item."""


@dataclass(frozen=True)
class ConsumerStatus:
    """A live consumer of a group and the queues it is allocated (per subscribed topic)."""

    client_id: str
    orderly: bool
    last_heartbeat: int
    expires_at: int
    topics: dict[str, str]
    """Topic → filter."""
    queues: dict[str, list[int] | None]
    """Topic → its allocated queues (FIFO topics); None: every queue, shared (NORMAL ...)."""


class MembershipService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        registry: ConsumerRegistry,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._registry = registry
        self._clock = clock

    def heartbeat(
        self,
        group: str,
        client_id: str,
        subscriptions: Mapping[str, str],
        *,
        filter_types: Mapping[str, str] | None = None,
        orderly: bool = False,
        heartbeat_timeout_seconds: int = DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
        access_key: str | None = None,
        admin: bool = False,
    ) -> ConsumerStatus:
        """Register ``client_id`` (or keep it registered) for ``heartbeat_timeout_seconds``;
        its status, with the queues it is allocated now. ``filter_types``: topic → TAG or
        SQL92, how its expression in ``subscriptions`` is read (TAG when absent); an SQL92
        filter is listed as ``SQL92 <condition>``.

        The registration records ``access_key``, an admin's too: while it is live, a heartbeat
        signed by another key is ClientIdInUse and changes nothing. An ``admin`` caller is
        exempt from that check only: it renews another key's live registration for its owner."""
        check_group_name(group)
        check_client_id(client_id)
        if not (
            MIN_HEARTBEAT_TIMEOUT_SECONDS
            <= heartbeat_timeout_seconds
            <= MAX_HEARTBEAT_TIMEOUT_SECONDS
        ):
            raise InvalidDuration(
                f"heartbeat_timeout_seconds must be {MIN_HEARTBEAT_TIMEOUT_SECONDS}-"
                f"{MAX_HEARTBEAT_TIMEOUT_SECONDS}"
            )
        if len(subscriptions) > MAX_MEMBER_TOPICS:
            raise InvalidRequest(f"a consumer subscribes at most {MAX_MEMBER_TOPICS} topics")
        topics = {}
        for topic, expression in subscriptions.items():
            check_topic_name(topic)
            typed = parse_filter(expression, (filter_types or {}).get(topic))
            topics[topic] = typed.subscription.describe()
        for topic in topics:
            self._topics.active(topic)  # TopicNotFound: nothing is stored
        timeout_ms = heartbeat_timeout_seconds * 1000

        def beat(_: int) -> ConsumerStatus | optimistic.Conflict:
            now = self._clock()
            membership = self._registry.load(group)
            stored = membership.members.get(client_id)
            if stored is not None and stored.owned_by_another(None if admin else access_key, now):
                raise ClientIdInUse(
                    f"client id {client_id!r} of group {group!r} is registered by another "
                    "access key; use another client id"
                )
            owner = access_key
            if (admin or owner is None) and stored is not None and stored.live(now):
                owner = stored.access_key or owner  # an admin renews it for its owner
            if (
                stored is not None
                and stored.access_key == owner
                and stored.topics == topics
                and stored.orderly == orderly
                and now + timeout_ms // 2 < stored.expires_at <= now + timeout_ms
            ):  # still registered for over half a timeout: no write (the item is rewritten
                # only about twice per timeout per member, not on every heartbeat)
                return self._status(membership, stored, now)
            member = Member(client_id, topics, orderly, now, now + timeout_ms, owner)
            membership.beat(member, now)
            if self._registry.save(membership):
                return self._status(membership, member, now)
            return CONFLICT

        return optimistic.update(
            beat,
            attempts=SAVE_ATTEMPTS,
            backoff=True,
            exhausted=optimistic.busy(
                f"group {group!r}'s registry is contended; retry the heartbeat"
            ),
        )

    def deregister(
        self,
        group: str,
        client_id: str,
        may_subscribe: Callable[[str], bool] | None = None,
        *,
        access_key: str | None = None,
    ) -> int:
        """Release every queue lock ``client_id`` holds on its FIFO topics, then remove it
        from the group, so successors take over at once; the number of locks released.

        Locks go first: a crash in between leaves the consumer registered, and a re-run
        (or its heartbeat timeout) finishes the job; the other order could leave locks
        nobody knows to release. ``may_subscribe(topic)`` (the caller's permission): every
        topic of the member must pass, and a live registration must be ``access_key``'s (None:
        an admin), else AccessDenied and nothing changes."""
        check_group_name(group)
        check_client_id(client_id)
        member = self._registry.load(group).members.get(client_id)
        if member is None:
            return 0
        if member.owned_by_another(access_key, self._clock()):
            raise AccessDenied(
                f"access denied: client id {client_id!r} of group {group!r} was registered "
                "by another access key"
            )
        denied = [t for t in member.topics if may_subscribe is not None and not may_subscribe(t)]
        if denied:  # only a key that may consume the member's topics removes it
            raise AccessDenied(f"access denied: consume topic {denied[0]} as group {group}")
        released = 0
        for topic in member.topics:
            try:
                definition = self._topics.active(topic)
            except TopicNotFound:
                continue
            if definition.message_type is not MessageType.FIFO:
                continue
            for queue in self._registry.locked_queues(group, topic, definition.queues, client_id):
                released += self._registry.release_lock(group, topic, queue, client_id)

        def leave(_: int) -> int | optimistic.Conflict:
            now = self._clock()
            membership = self._registry.load(group)
            if client_id not in membership.members:
                return released
            membership.leave(client_id, now)
            return released if self._registry.save(membership) else CONFLICT

        return optimistic.update(
            leave,
            attempts=SAVE_ATTEMPTS,
            backoff=True,
            exhausted=optimistic.busy(f"group {group!r}'s registry is contended; retry"),
        )

    def consumers(self, group: str) -> list[ConsumerStatus]:
        """The group's live consumers, sorted by client id, with their queues."""
        check_group_name(group)
        now = self._clock()
        membership = self._registry.load(group)
        return [self._status(membership, m, now) for m in membership.live(now)]

    def _status(self, membership: Membership, member: Member, now: int) -> ConsumerStatus:
        queues: dict[str, list[int] | None] = {}
        for topic in sorted(member.topics):
            try:
                definition = self._topics.active(topic)
            except TopicNotFound:
                continue
            if definition.message_type is MessageType.FIFO:
                queues[topic] = (
                    membership.allocated(topic, definition.queues, member.client_id, now) or []
                )
            else:
                queues[topic] = None
        return ConsumerStatus(
            member.client_id,
            member.orderly,
            member.last_heartbeat,
            member.expires_at,
            dict(member.topics),
            queues,
        )
