"""Consumer registration with a group: heartbeats and deregistration.

Push consumers register in the background (:class:`Heartbeater`): the service lists them in
``GET /v1/groups/{group}`` and, for FIFO topics, allocates the queues over the live ones
(a consumer silent for its heartbeat timeout is removed and its queues move). Shutting down
deregisters, which also releases the consumer's queue locks at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..message import TAG, FilterExpression, normalize_subscriptions
from ..transport import Transport
from ..wire import read_bool, read_int, read_list, read_mapping, read_str
from .paths import group_path

__all__ = ["ConsumerInfo", "Heartbeater", "deregister", "heartbeat", "new_client_id"]

log = logging.getLogger("cirrusmq.membership")


def new_client_id() -> str:
    """``host@pid@random``: unique per consumer instance (characters the service takes)."""
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-_.")[:60] or "host"
    return f"{host}@{os.getpid()}@{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ConsumerInfo:
    """A live consumer of a group, as the service sees it."""

    client_id: str
    orderly: bool
    last_heartbeat: int
    expires_at: int
    """Milliseconds since the epoch: removed then unless it heartbeats again."""
    queues: dict[str, tuple[int, ...] | None]
    """Topic → queues allocated to it (FIFO topics); None: every queue, shared."""
    filters: dict[str, str]
    """Topic → filter."""

    @classmethod
    def from_wire(cls, data: Any) -> ConsumerInfo:
        data = read_mapping(data)
        queues: dict[str, tuple[int, ...] | None] = {}
        filters: dict[str, str] = {}
        for entry in read_list(data, "topics"):
            topic = read_str(entry, "topic")
            filters[topic] = read_str(entry, "filter")
            raw = read_mapping(entry).get("queues")
            queues[topic] = None if raw is None else tuple(int(q) for q in raw)
        return cls(
            read_str(data, "client_id"),
            read_bool(data, "orderly"),
            read_int(data, "last_heartbeat"),
            read_int(data, "expires_at"),
            queues,
            filters,
        )


def heartbeat(
    transport: Transport,
    group: str,
    client_id: str,
    subscriptions: Mapping[str, FilterExpression | str],
    *,
    orderly: bool = False,
    timeout_s: int = 120,
) -> ConsumerInfo:
    """Register ``client_id`` with ``group`` (or keep it registered) for ``timeout_s``."""
    filters = normalize_subscriptions(subscriptions)
    types = {t: f.filter_type for t, f in filters.items() if f.filter_type != TAG}
    body = transport.request(
        "POST",
        group_path(group, "heartbeat"),
        json_body={
            "client_id": client_id,
            "subscriptions": {t: f.expression for t, f in filters.items()},
            **({"filter_types": types} if types else {}),
            "orderly": orderly,
            "heartbeat_timeout_seconds": int(timeout_s),
        },
    )
    return ConsumerInfo.from_wire(body)


def deregister(transport: Transport, group: str, client_id: str) -> None:
    """Remove ``client_id`` from ``group`` and release its queue locks at once."""
    transport.request("DELETE", f"{group_path(group, 'consumers')}/{quote(client_id, safe='@:')}")


class Heartbeater:
    """Heartbeats every ``interval_s`` on a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        transport: Transport,
        group: str,
        client_id: str,
        subscriptions: Callable[[], Mapping[str, FilterExpression | str]],
        *,
        orderly: bool,
        interval_s: float,
        timeout_s: int,
        on_new_queues: Callable[[], None] | None = None,
    ) -> None:
        """``on_new_queues``: called when a heartbeat allocates this consumer queues it did
        not have (a member left or was removed): nothing else announces their backlog to an
        idle consumer."""
        self._transport = transport
        self._on_new_queues = on_new_queues
        self.group = group
        self.client_id = client_id
        self._subscriptions = subscriptions
        self.orderly = orderly
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last: ConsumerInfo | None = None
        """What the last successful heartbeat answered."""
        self._warned = False

    def beat(self) -> ConsumerInfo | None:
        """One heartbeat now; None (logged) if it failed."""
        try:
            info = heartbeat(
                self._transport,
                self.group,
                self.client_id,
                self._subscriptions(),
                orderly=self.orderly,
                timeout_s=self.timeout_s,
            )
        except Exception as error:  # the next beat tries again; the timeout allows misses
            log.warning("group %s: heartbeat failed: %s", self.group, error)
            return None
        before, self.last = self.last, info
        self._warn_fifo(info)
        if before is not None and self._on_new_queues is not None and _gained(before, info):
            self._on_new_queues()
        return info

    def _warn_fifo(self, info: ConsumerInfo) -> None:
        """Once: a concurrent (not orderly) consumer of a FIFO topic (allocated queues)."""
        if self.orderly or self._warned:
            return
        fifo = sorted(t for t, queues in info.queues.items() if queues is not None)
        if fifo:
            self._warned = True
            log.warning(
                "group %s: FIFO topic(s) %s are consumed by a concurrent push consumer: a "
                "batch's messages are processed in parallel (out of order); use orderly=True",
                self.group,
                ", ".join(fifo),
            )

    def start(self) -> None:
        self.beat()
        self._thread = threading.Thread(
            target=self._run, name=f"cirrusmq-heartbeat-{self.group}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.beat()

    def stop(self, *, deregister_now: bool = True) -> None:
        """Stop beating; deregister (releasing the consumer's queue locks) unless told not to."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if deregister_now:
            try:
                deregister(self._transport, self.group, self.client_id)
            except Exception as error:  # it expires after its timeout anyway
                log.warning("group %s: deregistration failed: %s", self.group, error)


def _gained(before: ConsumerInfo, after: ConsumerInfo) -> bool:
    """Whether ``after`` allocates a queue ``before`` did not (per topic; None: every queue)."""
    for topic, queues in after.queues.items():
        had = before.queues.get(topic, ())
        if had is None:
            continue
        if queues is None or set(queues) - set(had):
            return True
    return False
