"""The notification channel: WebSocket connections that wait on (group, topics), told
"look now" when one of those topics gets data (docs/notifications.md).

:class:`ChannelService` serves the WebSocket routes: ``$connect`` (signed like any request,
with the same access keys), ``wait`` (register the connection as waiting: the key must be
allowed to consume each topic as that group, as a receive checks) and ``$disconnect``.
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
from typing import Any

from ..errors import AccessDenied, InvalidRequest
from ..rules.retries import is_internal, retry_parts
from ..storage.connection_posts import ConnectionPoster
from ..storage.connections import ConnectionStore, Waiter
from ..validation import check_group_name, check_topic_name
from .auth import Authenticator, SignedRequest

__all__ = [
    "CONNECT_PATH",
    "CONNECTION_TTL_S",
    "MAX_WAIT_TOPICS",
    "ChannelService",
    "Notifier",
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
        self, *, auth: Authenticator, connections: ConnectionStore, clock: Callable[[], int]
    ) -> None:
        self._auth = auth
        self._connections = connections
        self._clock = clock

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
        consume as that group) or InvalidSignature (the connection is unknown or its key
        disabled); nothing is stored then."""
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
        access_key = self._connections.access_key_of(connection_id)
        permissions = self._auth.permissions_of(access_key) if access_key else None
        if permissions is None:
            from ..errors import InvalidSignature

            raise InvalidSignature("this connection's access key is unknown or disabled")
        denied = [t for t in topics if not permissions.may_subscribe(group, t)]
        if denied:
            raise AccessDenied(
                f"access denied: this access key may not consume topic {denied[0]} as group {group}"
            )
        now_s = self._clock() // 1000
        unique = sorted(set(topics))
        self._connections.put_waiters(
            connection_id, group, unique, expires_at=now_s + CONNECTION_TTL_S
        )
        return {"type": "waiting", "group": group, "topics": unique}

    def disconnect(self, connection_id: str) -> None:
        self._connections.delete_connection(connection_id)


@dataclass(frozen=True)
class FanOut:
    """What one stream batch caused."""

    topics: int
    notified: int
    gone: int
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
    flight stays."""

    def __init__(
        self,
        *,
        connections: ConnectionStore,
        poster: ConnectionPoster,
        clock: Callable[[], int],
    ) -> None:
        self._connections = connections
        self._poster = poster
        self._clock = clock

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
            for waits, told in zip(by_connection.values(), results, strict=True)
            if told is None
            for w in waits
        }
        return FanOut(
            len(topics),
            notified=sum(1 for told in results if told),
            gone=sum(1 for told in results if told is False),
            failed_records=[
                sequence for sequence, name in appended if waited_topic(name) in failed
            ],
        )

    def _tell(self, waits: list[Waiter]) -> bool | None:
        """Post "look now" to one connection, then release its waiters; True: told, False:
        gone (the connection and these waiters are deleted), None: the post failed (the
        waiters stay)."""
        connection_id = waits[0].connection_id
        try:
            delivered = self._poster.post(connection_id, look_now(waits))
        except Exception:  # one broken connection must not keep the others waiting
            log.warning("post to connection %s failed", connection_id, exc_info=True)
            return None
        if not delivered:
            self._connections.delete_connection(connection_id)
            self._connections.delete_waiters(waits)
            return False
        self._connections.release_waiters(waits)
        return True


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
