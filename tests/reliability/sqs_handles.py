"""What the SQS rule sets (sqs_fifo_rules.py, sqs_standard_rules.py) share: the model of a
message and of the receipt handles receives returned, and the steps on it both take (record
a receive's answer, pick a handle, mark what a failed receive may have leased, drain the
queue at rest)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cirrusmq_api.compat.sqs import message_actions


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


class VisibilityChanges:
    """The visibility change of both rule sets (mixed in: the machine's ``_violate``,
    ``clock``; SqsRules' ``_sq_op``; SqsFifoRules' ``_sg_action``, ``_sg_failed``)."""

    def _change_op(
        self, model: QueueModel, handle: str, h: Handle, seconds: int, *, older_too: bool
    ) -> Any:
        """ChangeMessageVisibility through ``handle``. A change through the latest handle
        within its timeout sets the deadline; one through a handle past its time or an
        older one leaves the message uncertain. A failed change leaves it uncertain if it
        went through the latest handle (``older_too``: through any: a standard queue's
        older handle changes the current receive's timeout)."""
        m = model.msgs[h.body]
        params = {"QueueUrl": model.url, "ReceiptHandle": handle, "VisibilityTimeout": seconds}

        def apply(outcome: str, value: Any) -> None:
            latest = handle == m.handle
            if outcome != "ok" or not value.ok and self._sg_failed("change", value):
                m.uncertain = m.uncertain or latest or older_too  # it may have changed
                return
            live = m.deadline > self.clock.now
            if value.ok:
                if latest and live:
                    m.deadline = self.clock.now + seconds * 1000
                elif not m.surely_deleted:
                    m.uncertain = True  # a handle past its time or older changed something
            elif latest and live and not m.uncertain and not m.surely_deleted:
                self._violate(
                    "sqs-visibility",
                    f"{h.body}: a change through its latest handle refused ({value.code}) "
                    "within its visibility timeout",
                )

        return self._sq_op(
            f"sqs change visibility {h.body} to {seconds}s (handle of its receive {h.serial})",
            self._sg_action(message_actions.change_message_visibility, params),
            apply,
        )
