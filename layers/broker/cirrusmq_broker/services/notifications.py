"""The notification channel: WebSocket connections that wait on (group, topics), told
"look now" when one of those topics gets data (docs/notifications.md).

:class:`ChannelService` serves the WebSocket routes: ``$connect`` (signed like any request,
with the same access keys), ``wait`` (register the connection as waiting: the key must be
allowed to consume each topic as that group, as a receive checks; the pairs waited on are
capped per connection and per key, :class:`WaitLimits`) and ``$disconnect``.
:class:`Notifier` runs on the queue heads table's stream: a head moves on every append
(produce, delayed release, retry moves, transaction commits, redrive), so it reads the
touched topics' waiters (one consistent Query per topic per stream batch, never per
message), posts "look now" to each connection once, then removes the waiters it told. An
append to a group's retry topic (``retry.<group>.<topic>``: a nack, a lease's expiry) tells
that group's waiters on the topic: their receive answers when the retry is due. Nothing else
goes over the socket: a lost notification costs latency (the SDK's safety poll finds the
data), never a message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import AccessDenied, InvalidRequest, InvalidSignature, TooManyWaits
from ..rules.permissions import Permissions
from ..rules.retries import is_internal, retry_parts
from ..storage.connection_posts import ConnectionPoster
from ..storage.connections import Connection, ConnectionStore, Waiter, wait_digest
from ..validation import check_group_name, check_topic_name
from .auth import Authenticator, SignedRequest

__all__ = [
    "CONNECT_PATH",
    "CONNECTION_TTL_S",
    "MAX_WAIT_TOPICS",
    "ChannelService",
    "Notifier",
    "WaitLimits",
    "look_now",
    "touched_topics",
]

log = logging.getLogger(__name__)

CONNECT_PATH = "/v1/notifications"
"""The path a client signs for the upgrade request (method GET, empty body), whatever the
stage's URL: the signature covers the same text on AWS and locally."""
CONNECTION_TTL_S = 2 * 3600 + 600
"""API Gateway closes every WebSocket after 2 hours: items live a little longer, then TTL."""
MAX_WAIT_TOPICS = 100
POST_CONCURRENCY = 32
"""Posts in flight at once in one fan-out."""


@dataclass(frozen=True)
class WaitLimits:
    """How many distinct (group, topic) pairs may be waited on: a prefix grant names
    topics and groups without end, and each pair is a stored waiter item."""

    per_connection: int = 1000
    """By one connection over its life (a process's consumers share one connection)."""
    per_key: int = 20000
    """By the connections of one access key, counted over the connections it opened in
    the current and the previous window of :data:`CONNECTION_TTL_S` (every connection
    closes within 2 hours, so a live one's pairs are always counted; a closed one's stop
    counting after two windows)."""


class KeyCheck(Protocol):
    """What the channel asks of the access keys (:class:`Authenticator` answers it)."""

    def permissions_of(self, access_key: str) -> Permissions | None: ...


def look_now(waiters: Iterable[Waiter]) -> bytes:
    """The one frame the notifier sends: which (group, topics) have data. No message data."""
    groups: dict[str, set[str]] = {}
    for waiter in waiters:
        groups.setdefault(waiter.group, set()).add(waiter.topic)
    body = {
        "type": "look_now",
        "waits": [{"group": g, "topics": sorted(t)} for g, t in groups.items()],
    }
    return json.dumps(body, separators=(",", ":")).encode()


class ChannelService:
    """Connect, wait, disconnect: the WebSocket routes."""

    def __init__(
        self,
        *,
        auth: Authenticator,
        connections: ConnectionStore,
        clock: Callable[[], int],
        limits: WaitLimits = WaitLimits(),
        closer: Callable[[], ConnectionPoster] | None = None,
    ) -> None:
        """``closer``: the management API (built when first needed), which closes a
        connection whose key is no longer active (None: it is only forgotten)."""
        self._auth = auth
        self._connections = connections
        self._clock = clock
        self._limits = limits
        self._closer = closer

    def connect(self, connection_id: str, headers: Mapping[str, str]) -> str:
        """Check the upgrade request's signature (``GET`` :data:`CONNECT_PATH`, empty body;
        the nonce is claimed) and record the connection; return the access key."""
        request = SignedRequest(
            method="GET",
            path=CONNECT_PATH,
            raw_query="",
            headers={k.lower(): v for k, v in headers.items()},
            body=b"",
        )
        principal = self._auth.authenticate(request)
        now_s = self._clock() // 1000
        self._connections.put_connection(
            connection_id, principal.access_key, expires_at=now_s + CONNECTION_TTL_S
        )
        return principal.access_key

    def wait(self, connection_id: str, body: Any) -> dict[str, Any]:
        """Register ``{"action": "wait", "group": g, "topics": [...]}``; returns the reply
        frame. Raises InvalidRequest (a bad message), AccessDenied (a topic the key may not
        consume as that group), TooManyWaits (over a :class:`WaitLimits` cap) or
        InvalidSignature (the connection is unknown; or its key is disabled: the connection
        is forgotten and closed); nothing is stored then."""
        if not isinstance(body, Mapping):
            raise InvalidRequest("a wait message is a JSON object")
        group, topics = body.get("group"), body.get("topics")
        if not isinstance(group, str) or not isinstance(topics, list) or not topics:
            raise InvalidRequest('a wait message needs "group" (text) and "topics" (a list)')
        if len(topics) > MAX_WAIT_TOPICS or not all(isinstance(t, str) for t in topics):
            raise InvalidRequest(f'"topics" is a list of at most {MAX_WAIT_TOPICS} topic names')
        check_group_name(group)
        for topic in topics:
            check_topic_name(topic)
        connection = self._connections.connection(connection_id)
        if connection is None:
            raise InvalidSignature("this connection is unknown or closed")
        permissions = self._auth.permissions_of(connection.access_key)
        if permissions is None:
            self._close(connection_id)
            raise InvalidSignature("this connection's access key is unknown or disabled")
        denied = [t for t in topics if not permissions.may_subscribe(group, t)]
        if denied:
            raise AccessDenied(
                f"access denied: this access key may not consume topic {denied[0]} as group {group}"
            )
        now_s = self._clock() // 1000
        unique = sorted(set(topics))
        new = sorted({wait_digest(group, t) for t in unique} - connection.waits)
        if new:
            self._make_room(connection, new, now_s)
        self._connections.put_waiters(
            connection_id,
            group,
            unique,
            access_key=connection.access_key,
            expires_at=now_s + CONNECTION_TTL_S,
        )
        return {"type": "waiting", "group": group, "topics": unique}

    def disconnect(self, connection_id: str) -> None:
        self._connections.delete_connection(connection_id)

    def _close(self, connection_id: str) -> None:
        """Forget the connection and close it: its key no longer signs anything (its
        waiters go when a post finds it gone, or by their TTL)."""
        self._connections.delete_connection(connection_id)
        if self._closer is None:
            return
        try:
            self._closer().close(connection_id)
        except Exception:  # forgotten all the same: whatever it sends next is refused
            log.warning("closing connection %s failed", connection_id, exc_info=True)

    def _make_room(self, connection: Connection, new: list[str], now_s: int) -> None:
        """Count ``new`` pairs against the connection's and the key's caps (both or
        neither), or raise TooManyWaits (InvalidSignature: the connection closed)."""
        limits = self._limits
        if len(connection.waits) + len(new) > limits.per_connection:
            raise TooManyWaits(
                f"a connection waits on at most {limits.per_connection} (group, topic) pairs"
            )
        window = now_s // CONNECTION_TTL_S
        counts = self._connections.key_waits(connection.access_key, (window - 1, window))
        earlier = counts.get(window - 1, 0)
        key_full = TooManyWaits(
            f"the connections of an access key wait on at most {limits.per_key} (group, topic)"
            " pairs within two hours"
        )
        if earlier + counts.get(window, 0) + len(new) > limits.per_key:
            raise key_full
        full = self._connections.claim_waits(
            connection,
            new,
            connection_room=limits.per_connection - len(new),
            window=window,
            key_room=limits.per_key - earlier - len(new),
            window_expires_at=(window + 2) * CONNECTION_TTL_S,
        )
        if full == "key":
            raise key_full
        if full == "connection":
            if self._connections.connection(connection.connection_id) is None:
                raise InvalidSignature("this connection is closed")
            raise TooManyWaits(
                f"a connection waits on at most {limits.per_connection} (group, topic) pairs"
            )


@dataclass(frozen=True)
class FanOut:
    """What one stream batch caused."""

    topics: int
    notified: int
    gone: int
    closed: int = 0
    """Connections closed because their access key is disabled or deleted."""
    failed_records: list[str] = field(default_factory=list)
    """Sequence numbers of the records whose waiters a failed post did not tell: reported
    to the event source mapping as failed items, so that Lambda runs them again (from the
    earliest, up to the mapping's ``MaximumRetryAttempts``)."""


class Notifier:
    """Tells the connections waiting on the topics a stream batch touched to look now.

    A waiter is deleted only after its connection was told (or found gone), and only if it
    is still the registration the notifier read: a failed post (a 429 or 5xx after the
    client's retries) or a run cut short (the function's timeout) leaves it waiting, told
    by the batch's retry or by the next append; a wait sent again while the post was in
    flight stays. A connection whose access key is no longer active (disabled, deleted) is
    not told: it is closed (``DeleteConnection``) and forgotten, so whatever it sends next
    is refused. A waiter whose key may no longer consume its topic as its group (its
    permissions were narrowed since the wait) is not told either, and is released."""

    def __init__(
        self,
        *,
        connections: ConnectionStore,
        poster: ConnectionPoster,
        clock: Callable[[], int],
        auth: KeyCheck,
    ) -> None:
        self._connections = connections
        self._poster = poster
        self._clock = clock
        self._auth = auth

    def on_records(self, records: list[Mapping[str, Any]]) -> FanOut:
        appended = touched_records(records)
        topics = waited_topics(name for _, name in appended)
        now_s = self._clock() // 1000
        by_connection: dict[str, list[Waiter]] = {}
        for topic, groups in sorted(topics.items()):
            for waiter in self._connections.waiters(topic, now_s=now_s):
                if groups is None or waiter.group in groups:
                    by_connection.setdefault(waiter.connection_id, []).append(waiter)
        if not by_connection:
            return FanOut(len(topics), 0, 0)
        # posts in parallel: a fan-out to many connections takes a few round trips, not one
        # round trip per connection
        workers = min(POST_CONCURRENCY, len(by_connection))
        with ThreadPoolExecutor(workers, thread_name_prefix="notify") as pool:
            results = list(pool.map(self._tell, by_connection.values()))
        failed = {
            w.topic
            for waits, outcome in zip(by_connection.values(), results, strict=True)
            if outcome == FAILED
            for w in waits
        }
        return FanOut(
            len(topics),
            notified=results.count(TOLD),
            gone=results.count(GONE),
            closed=results.count(CLOSED),
            failed_records=[
                sequence for sequence, name in appended if waited_topic(name) in failed
            ],
        )

    def _tell(self, waits: list[Waiter]) -> str:
        """Post "look now" to one connection, then release its waiters: TOLD; GONE (410:
        the connection and these waiters are deleted); CLOSED (its key is no longer
        active: closed, not told, deleted); FAILED (the post failed: the waiters stay);
        DENIED (its key may no longer consume any of these topics as their groups: not
        told, those waiters released; a wait for them is refused from now on)."""
        connection_id = waits[0].connection_id
        access_key = waits[0].access_key or self._connections.access_key_of(connection_id)
        permissions = self._auth.permissions_of(access_key) if access_key is not None else None
        if permissions is None:
            try:
                self._poster.close(connection_id)
            except Exception:  # forgotten all the same: its next wait is refused
                log.warning("closing connection %s failed", connection_id, exc_info=True)
            self._forget(connection_id, waits)
            return CLOSED
        # a key's permissions may have lost a topic since its wait: not told of it any more
        denied = [w for w in waits if not permissions.may_subscribe(w.group, w.topic)]
        if denied:
            self._connections.release_waiters(denied)
            waits = [w for w in waits if permissions.may_subscribe(w.group, w.topic)]
            if not waits:
                return DENIED
        try:
            delivered = self._poster.post(connection_id, look_now(waits))
        except Exception:  # one broken connection must not keep the others waiting
            log.warning("post to connection %s failed", connection_id, exc_info=True)
            return FAILED
        if not delivered:
            self._forget(connection_id, waits)
            return GONE
        self._connections.release_waiters(waits)
        return TOLD

    def _forget(self, connection_id: str, waits: list[Waiter]) -> None:
        self._connections.delete_connection(connection_id)
        self._connections.delete_waiters(waits)


TOLD, GONE, CLOSED, FAILED, DENIED = "told", "gone", "closed", "failed", "denied"
"""What became of one connection in a fan-out."""


def waited_topic(name: str) -> str | None:
    """The topic whose waiters an append to ``name`` concerns (a retry topic's user topic),
    or None (another internal topic: nobody waits on it)."""
    parts = retry_parts(name)
    if parts is not None:
        return parts[1]
    return None if is_internal(name) else name


def waited_topics(touched: Iterable[str]) -> dict[str, set[str] | None]:
    """The topics whose waiters the appends to ``touched`` concern → the groups told (None:
    every group). A group's retry topic concerns that group's waiters on the user topic:
    one Query per topic, whether its own queues or its retry topics moved. Other internal
    topics (a DLQ) concern nobody: a waiter's topic is a user topic's name."""
    topics: dict[str, set[str] | None] = {}
    for name in touched:
        parts = retry_parts(name)
        if parts is None:
            if not is_internal(name):
                topics[name] = None
            continue
        group, origin = parts
        if origin not in topics:
            topics[origin] = {group}
        elif (groups := topics[origin]) is not None:
            groups.add(group)
    return topics


def touched_topics(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The topics whose queue heads advanced in these DynamoDB stream records (other items
    of the table, e.g. sweep checkpoints, and heads closed or reopened are left out)."""
    return {name for _, name in touched_records(records)}


def touched_records(records: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(sequence number, topic) of each record whose queue head advanced, in order."""
    touched: list[tuple[str, str]] = []
    for record in records:
        change = record.get("dynamodb") or {}
        new = change.get("NewImage") or {}
        old = change.get("OldImage") or {}
        stream = ((change.get("Keys") or {}).get("stream") or {}).get("S", "")
        name, _, queue = stream.rpartition("#")
        if not name or not queue.isdigit() or "next_offset" not in new:
            continue
        before = int((old.get("next_offset") or {}).get("N", "0"))
        if int(new["next_offset"]["N"]) > before:
            touched.append((str(change.get("SequenceNumber", "")), name))
    return touched
