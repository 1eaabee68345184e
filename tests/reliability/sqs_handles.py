"""What the SQS rule sets (sqs_fifo_rules.py, sqs_standard_rules.py) share: the model of a
message and of the receipt handles receives returned, and the steps on it both take (record
a receive's answer, pick a handle, mark what a failed receive may have leased, drain the
queue at rest)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SqsMsg:
    """One message sent to a queue of the rules."""

    body: str
    group: str = ""
    """Its message group (FIFO queues)."""
    required: bool = False
    """Its send answered a new message id."""
    message_id: str = ""
    deleted: bool = False
    """A delete through its latest handle answered ok (or a failed one may have deleted)."""
    surely_deleted: bool = False
    deadline: int = 0
    """Its visibility timeout's end (the clock's ms) as last known; 0: never received."""
    handle: str = ""
    """The handle of its latest receive."""
    uncertain: bool = False
    """A failed request may have changed its visibility or leased it."""


@dataclass
class Handle:
    body: str
    serial: int
    """Which receive of the message gave it (1: its first)."""


@dataclass
class QueueModel:
    """One queue of the rules: its messages and every handle a receive returned."""

    url: str = ""
    msgs: dict[str, SqsMsg] = field(default_factory=dict)
    handles: list[tuple[str, Handle]] = field(default_factory=list)
    """Every handle a receive returned, in order."""
    serials: dict[str, int] = field(default_factory=dict)


def record_received(
    model: QueueModel, answer: list[tuple[str, str]], now: int, visibility_s: int
) -> None:
    """A receive's answer (bodies and handles), judged already: each message's new deadline
    and latest handle."""
    for body, handle in answer:
        m = model.msgs.get(body)
        if m is None:
            continue
        m.deadline, m.handle, m.uncertain = now + visibility_s * 1000, handle, False
        if not m.surely_deleted:
            m.deleted = False  # received again: a failed delete did not delete it
        model.serials[body] = model.serials.get(body, 0) + 1
        model.handles.append((handle, Handle(body, model.serials[body])))


def may_have_leased(model: QueueModel, now: int) -> None:
    """A receive that failed may have leased what was visible: those are uncertain."""
    for m in model.msgs.values():
        if not m.surely_deleted and m.deadline <= now:
            m.uncertain = True


def pick_handle(model: QueueModel, p: int) -> tuple[str, Handle]:
    """A handle a receive returned: mostly a message's latest one, else any."""
    handles = model.handles
    latest = [(t, h) for t, h in handles if t == model.msgs[h.body].handle]
    if p % 4 and latest:
        return latest[p % len(latest)]
    return handles[p % len(handles)]


def drain(
    model: QueueModel, receive: Callable[[], Any], delete: Callable[[str, Handle], Any]
) -> None:
    """Receive until nothing comes, deleting each message received (``receive`` and
    ``delete`` run a request to its end)."""
    for _ in range(40):
        before = len(model.handles)
        receive()
        fresh = model.handles[before:]
        for handle, h in fresh:
            delete(handle, h)
        if not fresh:
            break
