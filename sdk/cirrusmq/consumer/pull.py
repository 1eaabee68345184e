""":class:`PullConsumer`: read a topic's queues by offset, keeping the offsets locally.

RocketMQ's lite pull consumer: ``assign(topic, queues)``, ``seek(queue, offset)``,
``seek_to_timestamp(ms)``, ``seek_to_beginning()`` / ``seek_to_end()``, ``poll(timeout)``,
``commit()``. No consumer group state is used on the service (no leases, no acks): the
consumer reads ``GET /v1/topics/{topic}/queues/{queue}/messages?offset=...`` and keeps its
positions itself; ``commit()`` stores them in SQLite
(:class:`~cirrusmq.consumer.offset_store.OffsetStore`)
under ``<group>/<instance id>``, so a restarted consumer with the same names goes on from its
last commit (messages polled after that commit are read again: at least once).
"""

from __future__ import annotations

import collections
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from os import PathLike
from typing import IO, Any
from urllib.parse import quote

from ..client_transport import client_transport
from ..credentials import Credentials
from ..errors import ClientClosedError, MQError
from ..message import FilterExpression, MessageView
from ..transport import Transport
from ..wire import read_bool, read_int, read_list, read_optional_int
from .offset_owner import claim_owner
from .offset_store import OffsetStore

__all__ = ["PullConsumer", "TopicOffsets", "default_instance_id", "read_topic_offsets"]

log = logging.getLogger("cirrusmq.pull_consumer")

MAX_WAIT_S = 20
CONSUME_FROM = ("latest", "earliest")


def default_instance_id() -> str:
    """This host's name: stable across restarts of a consumer on the same machine."""
    return socket.gethostname() or "localhost"


def _topic_path(topic: str) -> str:
    return f"/v1/topics/{quote(topic, safe='')}"


TopicOffsets = dict[int, tuple[int, int, int | None]]
"""Queue -> (min offset, max offset, offset for the timestamp asked or None); the min offset
is 0 when not asked for."""


def read_topic_offsets(
    transport: Transport,
    topic: str,
    *,
    timestamp_ms: int | None = None,
    include_min: bool = True,
) -> TopicOffsets:
    """``GET /v1/topics/{topic}/offsets`` (with ``?timestamp=``; ``include_min=false``: the
    queue ends only, one read on the service)."""
    params = {"timestamp": str(timestamp_ms)} if timestamp_ms is not None else {}
    if not include_min:
        params["include_min"] = "false"
    body = transport.request("GET", f"{_topic_path(topic)}/offsets", params=params or None)
    return {
        read_int(q, "queue"): (
            read_optional_int(q, "min_offset") or 0,
            read_int(q, "max_offset"),
            read_optional_int(q, "timestamp_offset"),
        )
        for q in read_list(body, "queues")
    }


def timestamp_ms_of(value: int | float | datetime) -> int:
    """Milliseconds since the epoch from an int (ms) or an aware/naive-UTC datetime."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


class PullConsumer:
    """Reads one topic's queues by offset; offsets kept locally (SQLite).

    ``group`` and ``instance_id`` (default: the host name) name the stored offsets; the
    service does not know them. A queue without a stored offset starts at ``consume_from``:
    ``"latest"`` (only new messages, RocketMQ's default) or ``"earliest"`` (the earliest
    retained one). ``filter_expression`` is applied by the service (skipped messages are
    passed, not returned). Thread-safe; a context manager.
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        *,
        instance_id: str | None = None,
        offset_store_path: str | PathLike[str] | None = None,
        consume_from: str = "latest",
        filter_expression: FilterExpression | str = "*",
        max_poll_messages: int = 32,
        poll_interval_s: float = 1.0,
        auto_commit: bool = False,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        transport: Transport | None = None,
    ) -> None:
        if consume_from not in CONSUME_FROM:
            raise ValueError(f"consume_from must be one of {CONSUME_FROM}")
        if not 1 <= max_poll_messages <= 1000:
            raise ValueError("max_poll_messages must be 1-1000")
        self.group = group
        self.instance_id = instance_id or default_instance_id()
        self.owner = f"{group}/{self.instance_id}"
        """The key of this consumer's rows in the offset store."""
        self.consume_from = consume_from
        self.filter = (
            filter_expression
            if isinstance(filter_expression, FilterExpression)
            else FilterExpression(filter_expression)
        )
        self.max_poll_messages = max_poll_messages
        self.poll_interval_s = poll_interval_s
        self.auto_commit = auto_commit
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
        )
        self._store = OffsetStore(offset_store_path)
        self._claim: IO[str] | None = None
        self._claimed_topic: str | None = None
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._topic: str | None = None
        self._positions: dict[int, int] = {}
        self._committed: dict[int, int] = {}
        self._rotation = itertools.count()
        self._ends: dict[int, int] | None = None
        """Queue ends seen by the last check (several queues: reads go only where the end
        is past the position; an idle poll costs one request, not one per queue)."""
        self.truncations: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=100)
        """(queue, requested offset, offset read from) of the last reads that found the
        requested offsets past retention (the consumer skipped to the earliest retained one)."""

    # ------------------------------------------------------------------ assignment
    @property
    def topic(self) -> str | None:
        return self._topic

    @property
    def assignment(self) -> list[int]:
        """The queues read, in order."""
        return sorted(self._positions)

    def assign(self, topic: str, queues: Iterable[int] | None = None) -> None:
        """Read ``queues`` of ``topic`` (default: all of them) from their committed offsets
        (or ``consume_from`` for queues without one)."""
        self._check_open()
        offsets = read_topic_offsets(self._transport, topic)
        wanted = sorted(offsets) if queues is None else sorted(set(queues))
        unknown = [q for q in wanted if q not in offsets]
        if unknown:
            raise ValueError(f"topic {topic} has queues 0-{len(offsets) - 1}, not {unknown}")
        if self._claim is None or self._claimed_topic != topic:  # one live owner
            claim = claim_owner(self._store.path, self.owner, topic)
            if self._claim is not None:
                self._claim.close()
            self._claim, self._claimed_topic = claim, topic
        stored = self._store.load(self.owner, topic)
        with self._lock:
            self._topic = topic
            self._committed = {q: stored[q] for q in wanted if q in stored}
            self._positions = {}
            for q in wanted:
                low, high, _ = offsets[q]
                start = high if self.consume_from == "latest" else low
                self._positions[q] = self._committed.get(q, start)

    def _check_assigned(self, queue: int | None = None) -> str:
        self._check_open()
        if self._topic is None:
            raise ValueError("assign(topic, queues) first")
        if queue is not None and queue not in self._positions:
            raise ValueError(f"queue {queue} is not assigned (assigned: {self.assignment})")
        return self._topic

    # ------------------------------------------------------------------ positions
    def position(self, queue: int) -> int:
        """The next offset :meth:`poll` reads from ``queue``."""
        self._check_assigned(queue)
        return self._positions[queue]

    def committed(self, queue: int) -> int | None:
        """The offset stored by the last :meth:`commit` (None if never)."""
        self._check_assigned(queue)
        return self._committed.get(queue)

    def seek(self, queue: int, offset: int) -> None:
        """Read ``queue`` from ``offset`` on (stored at the next :meth:`commit`)."""
        self._check_assigned(queue)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an integer >= 0, not {offset!r}")
        with self._lock:
            self._positions[queue] = offset

    def seek_to_timestamp(self, timestamp: int | datetime) -> None:
        """Every assigned queue from the first message stored at or after ``timestamp``
        (ms since the epoch, or a datetime); found from the service's index."""
        topic = self._check_assigned()
        offsets = read_topic_offsets(
            self._transport, topic, timestamp_ms=timestamp_ms_of(timestamp)
        )
        with self._lock:
            for q in self._positions:
                at = offsets[q][2]
                self._positions[q] = offsets[q][1] if at is None else at

    def seek_to_beginning(self) -> None:
        """Every assigned queue from its earliest retained offset."""
        self._seek_bound(0)

    def seek_to_end(self) -> None:
        """Every assigned queue from its end (only messages sent from now on)."""
        self._seek_bound(1)

    def _seek_bound(self, which: int) -> None:
        topic = self._check_assigned()
        offsets = read_topic_offsets(self._transport, topic)
        with self._lock:
            for q in self._positions:
                self._positions[q] = offsets[q][which]

    # ------------------------------------------------------------------ reading
    def poll(self, timeout: float = 1.0) -> list[MessageView]:
        """Up to ``max_poll_messages`` messages, waiting up to ``timeout`` seconds for some.

        Positions move past what is returned (and past filtered-out or expired messages);
        :meth:`commit` stores them. With ``auto_commit``, each poll first commits what the
        previous one returned. One queue: the service long-polls. Several: one request
        reads every queue's end, then only queues with something new are read; while
        nothing is, that check is repeated every ``poll_interval_s``.
        """
        topic = self._check_assigned()
        if self.auto_commit:
            self.commit()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            got: list[MessageView] = []
            queues = self._rotated()
            single = len(queues) == 1
            if not single:
                queues = self._with_news(topic, queues)
            for q in queues:
                room = self.max_poll_messages - len(got)
                if room <= 0:
                    break
                remaining = deadline - time.monotonic()
                wait = min(MAX_WAIT_S, int(remaining)) if single and remaining > 1 else 0
                got += self._read(topic, q, room, wait)
            remaining = deadline - time.monotonic()
            if got or remaining <= 0 or self._closed.is_set():
                return got
            if queues and not single:
                continue  # read but all filtered out: the ends tell whether more is there
            if not single or remaining < 1:
                self._closed.wait(min(self.poll_interval_s, remaining))
                self._ends = None  # look again after the pause

    def _with_news(self, topic: str, queues: list[int]) -> list[int]:
        """The queues whose end is past the position (the ends checked again when the last
        ones known show nothing new)."""
        checked = self._ends is None
        if checked:
            self._check_ends(topic)
        news = self._news(topic, queues, fresh=checked)
        if news or checked:
            return news
        self._check_ends(topic)
        return self._news(topic, queues, fresh=True)

    def _check_ends(self, topic: str) -> None:
        ends = read_topic_offsets(self._transport, topic, include_min=False)
        self._ends = {q: high for q, (_, high, _) in ends.items()}

    def _news(self, topic: str, queues: list[int], *, fresh: bool) -> list[int]:
        """Queues to read: a position below the end, or (on a fresh check) beyond it.

        The ends are read eventually consistently, so an end below the position may just
        be stale: the position is never moved back from here (that would deliver messages
        again). Such a queue is read instead: the read checks the offset against the
        consistent head and answers InvalidOffset only if the queue really ends lower
        (e.g. the topic was deleted and made again), which :meth:`_read` handles."""
        ends = self._ends or {}
        with self._lock:
            return [
                q
                for q in queues
                if self._positions[q] < ends.get(q, 0)
                or (fresh and self._positions[q] > ends.get(q, 0))
            ]

    def _rotated(self) -> list[int]:
        with self._lock:
            queues = sorted(self._positions)
        if not queues:
            return []
        start = next(self._rotation) % len(queues)
        return queues[start:] + queues[:start]

    def _read(self, topic: str, queue: int, room: int, wait_s: int) -> list[MessageView]:
        with self._lock:
            offset = self._positions[queue]
        params = {
            "offset": str(offset),
            "max_messages": str(room),
            **self.filter.wire,
            "wait_seconds": str(wait_s),
        }
        try:
            body: Any = self._transport.request(
                "GET",
                f"{_topic_path(topic)}/queues/{queue}/messages",
                params=params,
                timeout_s=self._transport.request_timeout_s + wait_s,
            )
        except MQError as error:
            end = error.details.get("max_offset") if error.code == "InvalidOffset" else None
            if isinstance(end, int):  # e.g. the topic was deleted and made again
                log.warning(
                    "%s queue %d: offset %d is beyond the end (%d); going on from the end",
                    topic,
                    queue,
                    offset,
                    end,
                )
                with self._lock:
                    if self._positions.get(queue) == offset:
                        self._positions[queue] = end
                return []
            raise
        start, following = read_int(body, "start_offset"), read_int(body, "next_offset")
        if read_bool(body, "truncated", False):
            log.warning(
                "%s queue %d: offsets %d-%d are past retention; reading from %d",
                topic,
                queue,
                offset,
                start - 1,
                start,
            )
            self.truncations.append((queue, offset, start))
        messages = [MessageView.from_wire(m) for m in read_list(body, "messages")]
        if self._ends is not None:  # a read tells the queue's end for free
            self._ends[queue] = max(self._ends.get(queue, 0), read_int(body, "max_offset"))
        with self._lock:
            if self._positions.get(queue) == offset:  # not moved by a seek meanwhile
                self._positions[queue] = following
        return messages

    # ------------------------------------------------------------------ committing
    def commit(self) -> None:
        """Store the current positions (a restarted consumer goes on from them)."""
        topic = self._check_assigned()
        with self._lock:
            changed = {q: o for q, o in self._positions.items() if self._committed.get(q) != o}
            if not changed:
                return
            self._store.save(self.owner, topic, changed, now_ms=int(time.time() * 1000))
            self._committed.update(changed)

    # ------------------------------------------------------------------ closing
    def _check_open(self) -> None:
        if self._closed.is_set():
            raise ClientClosedError("the pull consumer is closed")

    def close(self) -> None:
        """Release the connection pool and the offset store (idempotent; does not commit)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._claim is not None:
            self._claim.close()  # drops the owner's flock
        self._store.close()
        if self._own_transport:
            self._transport.close()

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
