"""The order in which a FIFO receive hands out message groups when each group is held on its
own (SQS's FIFO queues).

A receive hands out as many messages of one group as it can, in order, before the next
group; groups come in the order their first message became visible (sent, or its
visibility timeout passed), whichever topic queue they hash to. A run is what one group of
one queue may hand out now (or a lease of several groups, whole): its messages in order and
when its first one became visible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model import StoredMessage


@dataclass(frozen=True)
class GroupRun:
    """One message group's messages a queue may hand out now, in order."""

    queue: int
    visible_since: int
    """When its first message became visible (ms): sent or due, or its lease's deadline."""
    messages: list[StoredMessage]


def visible_since(message: StoredMessage) -> int:
    """When a message never delivered became visible: stored, or due (a not-before time)."""
    due = message.system.delivery_timestamp
    return max(message.stored_timestamp, due or 0)


def runs_of(
    queue: int,
    again: Iterable[tuple[int, list[StoredMessage]]],
    new: Iterable[StoredMessage],
) -> list[GroupRun]:
    """The runs of one queue: ``again`` (each expired lease's deadline and the messages it
    redelivers), then ``new`` (held or unread messages), per message group in offset order.
    A lease whose messages are of several groups is a run of its own; a message without a
    group makes the whole queue one run, in the order given (it holds every group)."""
    again, new = list(again), list(new)
    messages = [m for _, ms in again for m in ms] + new
    if any(m.message_group is None for m in messages):
        first = min((d for d, ms in again if ms), default=None)
        since = first if first is not None else min(map(visible_since, messages), default=0)
        return [GroupRun(queue, since, messages)] if messages else []
    runs: list[GroupRun] = []
    by_group: dict[str, list[tuple[int, StoredMessage]]] = {}
    for deadline, ms in again:
        if len({m.message_group for m in ms}) > 1:
            runs.append(GroupRun(queue, deadline, ms))
            continue
        for m in ms:
            by_group.setdefault(m.message_group or "", []).append((deadline, m))
    for m in new:
        by_group.setdefault(m.message_group or "", []).append((visible_since(m), m))
    for entries in by_group.values():
        entries.sort(key=lambda entry: entry[1].offset)
        runs.append(GroupRun(queue, entries[0][0], [m for _, m in entries]))
    return runs


def visible_order(runs: Iterable[GroupRun], budget: int) -> list[StoredMessage]:
    """Up to ``budget`` messages: whole runs, the one visible longest first (of those
    visible since the same moment, the one whose first message is oldest), the last one
    cut at the budget."""
    ordered = sorted(
        runs,
        key=lambda r: (
            r.visible_since, r.messages[0].stored_timestamp, r.queue, r.messages[0].offset
        ),
    )  # fmt: skip
    return [m for run in ordered for m in run.messages][:budget]
