"""SQS FIFO message groups in the model-based test: rules of sqs_rules.py's optional set
(mixed in only by a search that lists them, rulesets.py) on a FIFO queue ``gq.fifo`` with
three message groups, two of them on the same topic queue.

The rules send (a group id, a new deduplication id or the last one again), receive (1, 2, 3
or 10 messages, 30 s visibility; faults at AWS calls), delete and change the visibility
(0, 5 or 40 s) through any handle a receive returned (the latest or an older one), race a
receive with another request on the other container, and let time pass (``sqs_wait``).

The model is SQS's (a group's messages are handed out in order; a message in flight holds
the later ones of its group; each message has its own visibility timeout). A receive may
return a message of group G only when every earlier message of G was deleted or comes
before it in the same answer (``fifo-order``: this also forbids one while an earlier one
of its group is in flight; SQS does return a message made visible again while a later one
of its group is still in flight), never while its own visibility timeout runs
(``redelivered-while-invisible``: two receivers never hold it at once), never after its
delete answered ok (``acked-redelivered``), never a repeat send (``stored-twice``). A
delete through the message's latest handle answers ok exactly while that handle's timeout
runs (``sqs-delete``); a visibility change through it then is done (``sqs-visibility``).
At rest, first with the clock standing (the containers' cached FIFO waits past their
re-read bound, FIFO_RECHECK_MAX_SECONDS of real time), the queue is drained of what free
groups hold: a message whose group has nothing in flight and nothing undeleted before it is
received (``sqs-stall``: no group waits behind another's delivery); then, the clock past
every timeout, each message whose send answered a new id was deleted (``lost``).

A request that failed (a fault, a crash) may have taken effect: a receive may have leased
what was visible, a delete deleted, a change changed. The messages it may have touched are
``uncertain`` (no judgement of their visibility or delete answers) until a receive returns
them again; a message a failed delete may have deleted counts as deleted for the order.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from cirrusmq_api.compat.sqs import message_actions, queue_actions
from cirrusmq_api.compat.sqs.errors import SqsError
from cirrusmq_broker import limits
from faults import INJECTOR, KINDS, Fault
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from sqs_handles import (
    Handle,
    QueueModel,
    SqsMsg,
    VisibilityChanges,
    drain,
    may_have_leased,
    pick_handle,
    record_received,
)

GROUPS_QUEUE = "gq.fifo"
VISIBILITY_S = 30
CHANGES_S = (0, 5, 40)
MOSTS = (1, 2, 3, 10)
"""MaxNumberOfMessages of a receive: mostly small, so that the budget cuts groups."""


def _groups() -> tuple[str, str, str]:
    """Three group ids: the first two on the same topic queue, the third on another."""
    queue_of = lambda g: zlib.crc32(g.encode()) % limits.DEFAULT_QUEUES  # noqa: E731
    same = next(f"gb{n}" for n in range(1000) if queue_of(f"gb{n}") == queue_of("ga"))
    other = next(f"gc{n}" for n in range(1000) if queue_of(f"gc{n}") != queue_of("ga"))
    return "ga", same, other


GROUP_IDS = _groups()
_faults = st.one_of(
    st.none(),
    st.builds(Fault, at=st.integers(0, 14), kind=st.sampled_from(KINDS)),
)
_picks = st.integers(0, 63)
_containers = st.integers(0, 1)


@dataclass
class Answer:
    """An SQS action's answer: its result, or the SQS error it refused with."""

    result: dict[str, Any] | None = None
    code: str = ""
    status: int = 200
    fired: bool = False
    """A fault fired during the request."""

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def shown(self) -> str:
        if self.result is None:
            return f"refused {self.code} ({self.status})"
        if "Messages" in self.result:
            return str([m["Body"] for m in self.result["Messages"]])
        return "ok"


@dataclass
class GroupsModel(QueueModel):
    order: dict[str, list[str]] = field(default_factory=dict)
    """Group → its stored messages' bodies in send order."""
    last_dedup: str = ""


class SqsFifoRules(VisibilityChanges):
    """Mixed into SqsRules (the machine's ``_run``, ``_interleave``, ``_violate``, ``world``,
    ``clock``, ``log``, ``counter``; SqsRules' ``_sq_call``, ``_sq_call_on``, ``_sq_op``)."""

    def _sg_setup(self) -> None:
        self.sg_ready = False
        self.sg = GroupsModel()

    def _sg_ready(self, b: int) -> None:
        """The groups queue (once per history, on container ``b``, without faults)."""
        if self.sg_ready:
            return
        self.sg_ready = True
        answer = queue_actions.create_queue(
            self._sq_call(b), {"QueueName": GROUPS_QUEUE, "Attributes": {"FifoQueue": "true"}}
        )
        self.sg.url = answer["QueueUrl"]
        self.log.append(f"[{b}] sqs queue {GROUPS_QUEUE} (groups {', '.join(GROUP_IDS)})")

    def _sg_action(self, action: Any, params: dict[str, Any]) -> Any:
        """Call an SQS action: an SQS error is an answer (refused, code, status, whether a
        fault fired), not an exception."""

        def call(broker: Any) -> Any:
            try:
                return Answer(action(self._sq_call_on(broker), params))
            except SqsError as exc:
                return Answer(code=exc.code, status=exc.status, fired=INJECTOR.fired is not None)

        return call

    def _sg_failed(self, what: str, value: Answer) -> bool:
        """A refusal that may not be the action's own answer: one while a fault fired (a
        throttle, a lost answer), or a 5xx (an internal error when no fault fired)."""
        if value.ok or (value.status < 500 and not value.fired):
            return False
        if not value.fired:
            self._violate("internal-error", f"{what}: {value.code} ({value.status})")
        return True

    # ------------------------------------------------------------------ requests
    def _sg_send(self, p: int, q: int) -> Any:
        model = self.sg
        self.counter += 1
        body = f"s{self.counter}"
        group = GROUP_IDS[p % 3]
        dedup = model.last_dedup if q % 5 == 0 and model.last_dedup else f"e{self.counter}"
        model.last_dedup = dedup
        msg = SqsMsg(body, group)
        model.msgs[body] = msg
        params = {"QueueUrl": model.url, "MessageBody": body, "MessageGroupId": group,
                  "MessageDeduplicationId": dedup}  # fmt: skip

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok" or not value.ok:
                if outcome == "ok" and not self._sg_failed(f"send {body}", value):
                    self._violate("internal-error", f"send {body} refused: {value.code}")
                return
            msg.message_id = value.result["MessageId"]
            if any(m.message_id == msg.message_id for m in model.msgs.values() if m is not msg):
                return  # a repeat within the deduplication window: stored nothing
            msg.required = True
            model.order.setdefault(group, []).append(body)

        return self._sq_op(
            f"sqs send {GROUPS_QUEUE} {body} group {group} dedup {dedup}",
            self._sg_action(message_actions.send_message, params),
            apply,
        )

    def _sg_receive(self, most: int) -> Any:
        model = self.sg
        params = {"QueueUrl": model.url, "MaxNumberOfMessages": most, "WaitTimeSeconds": 0,
                  "VisibilityTimeout": VISIBILITY_S}  # fmt: skip

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok" or not value.ok:
                if outcome == "ok" and not self._sg_failed("receive", value):
                    self._violate("internal-error", f"receive refused: {value.code}")
                may_have_leased(model, self.clock.now)
                return
            messages = value.result.get("Messages", [])
            self._sg_received([(x["Body"], x["ReceiptHandle"]) for x in messages])

        return self._sq_op(
            f"sqs receive {GROUPS_QUEUE} max {most}",
            self._sg_action(message_actions.receive_message, params),
            apply,
        )

    def _sg_received(self, answer: list[tuple[str, str]]) -> None:
        """Judge a receive's answer (bodies and handles, in order), then record it."""
        model, now = self.sg, self.clock.now
        position = {body: n for n, (body, _) in enumerate(answer)}
        for n, (body, _) in enumerate(answer):
            m = model.msgs.get(body)
            if m is None:
                self._violate("unsent-delivered", f"{body} from {GROUPS_QUEUE}: never sent")
                continue
            if not m.required:
                self._violate("stored-twice", f"{body}: its send answered an earlier id")
            if m.surely_deleted:
                self._violate("acked-redelivered", f"{body}: received after its delete")
            if not m.uncertain and m.deadline > now:
                self._violate(
                    "redelivered-while-invisible",
                    f"{body}: received while its visibility timeout runs (to {m.deadline})",
                )
            for earlier in model.order.get(m.group, []):
                if earlier == body:
                    break
                e = model.msgs[earlier]
                if not e.deleted and position.get(earlier, n) >= n:
                    state = "in flight" if e.deadline > now else "not deleted"
                    self._violate(
                        "fifo-order",
                        f"{body} (group {m.group}) received while {earlier}, before it, is "
                        f"{state} and not earlier in this answer",
                    )
        record_received(model, answer, now, VISIBILITY_S)

    def _sg_delete(self, handle: str, h: Handle) -> Any:
        model = self.sg
        m = model.msgs[h.body]
        params = {"QueueUrl": model.url, "ReceiptHandle": handle}

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok" or not value.ok and self._sg_failed("delete", value):
                m.deleted = True  # it may have deleted
                m.uncertain = True
                return
            latest = handle == m.handle
            live = m.deadline > self.clock.now
            if value.ok:
                if latest and not live and not m.uncertain and not m.surely_deleted:
                    self._violate(
                        "sqs-delete", f"{h.body}: deleted through a handle past its timeout"
                    )
                if not latest and not m.surely_deleted and not m.uncertain:
                    self._violate(
                        "stale-ack-acked",
                        f"{h.body}: deleted through the handle of its receive {h.serial}, "
                        "received again since",
                    )
                if latest or not m.uncertain:
                    m.deleted = m.surely_deleted = True
            elif latest and live and not m.uncertain and not m.surely_deleted:
                self._violate(
                    "sqs-delete",
                    f"{h.body}: a delete through its latest handle refused ({value.code}) "
                    "within its visibility timeout",
                )

        return self._sq_op(
            f"sqs delete {h.body} (handle of its receive {h.serial})",
            self._sg_action(message_actions.delete_message, params),
            apply,
        )

    def _sg_change(self, handle: str, h: Handle, seconds: int) -> Any:
        return self._change_op(self.sg, handle, h, seconds, older_too=False)

    def _sg_handle(self, p: int) -> tuple[str, Handle]:
        return pick_handle(self.sg, p)

    def _sg_other(self, kind: int, p: int, q: int) -> Any:
        """The request raced against a receive: another receive, a delete or a change."""
        if kind % 3 == 0 or not self.sg.handles:
            return self._sg_receive(MOSTS[q % 4])
        handle, h = self._sg_handle(p)
        if kind % 3 == 1:
            return self._sg_delete(handle, h)
        return self._sg_change(handle, h, CHANGES_S[q % 3])

    # ------------------------------------------------------------------ the rules
    @rule(b=_containers, p=_picks, q=_picks)
    def sqs_fifo_send(self, b: int, p: int, q: int) -> None:
        self._sg_ready(b)
        self._run(b, None, self._sg_send(p, q))

    @rule(b=_containers, q=_picks, fault=_faults)
    def sqs_fifo_receive(self, b: int, q: int, fault: Fault | None) -> None:
        self._sg_ready(b)
        self._run(b, fault, self._sg_receive(MOSTS[q % 4]))

    @precondition(lambda self: getattr(self, "sg_ready", False) and self.sg.handles)
    @rule(b=_containers, p=_picks, fault=_faults)
    def sqs_fifo_delete(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._sg_delete(*self._sg_handle(p)))

    @precondition(lambda self: getattr(self, "sg_ready", False) and self.sg.handles)
    @rule(b=_containers, p=_picks, q=_picks, fault=_faults)
    def sqs_fifo_change(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._sg_change(*self._sg_handle(p), CHANGES_S[q % 3]))

    @rule(b=_containers, at=st.integers(0, 12), kind=_picks, p=_picks, q=_picks)
    def sqs_fifo_race(self, b: int, at: int, kind: int, p: int, q: int) -> None:
        """A receive paused before its ``at``-th AWS call while another receive, a delete
        or a change runs on the other container."""
        self._sg_ready(b)
        self._interleave(b, self._sg_receive(MOSTS[p % 4]), at, self._sg_other(kind, p, q))

    # ------------------------------------------------------------------ at rest
    def _sg_free(self) -> list[SqsMsg]:
        """The messages a receive must reach now: each free group's first one not deleted
        (nothing of its group in flight, nothing uncertain in it)."""
        model, now, free = self.sg, self.clock.now, []
        for bodies in model.order.values():
            open_ = [model.msgs[b] for b in bodies if not model.msgs[b].surely_deleted]
            msgs = [m for m in open_ if not m.deleted]
            if msgs and not any(m.uncertain or m.deadline > now for m in open_):
                free.append(msgs[0])
        return free

    def _sg_no_stall(self) -> None:
        """Before time passes (but the few real seconds that bound a container's cached
        FIFO waits): container 0 drains what free groups hold, each message received
        deleted; a message of a free group it never reaches stalls behind another group
        (``sqs-stall``)."""
        for broker in self.world.brokers:
            _recheck_bound_passed(broker)
        self.log.append(
            "the clock stands, cached FIFO waits at their re-read bound: free groups drained"
        )
        self._sg_drain()
        stalled = self._sg_free()
        if stalled:
            self._violate(
                "sqs-stall",
                ", ".join(f"{m.body} ({m.group})" for m in stalled) + " never received: "
                "nothing of its group in flight or before it",
            )

    def _sg_drain(self) -> None:
        """Container 0 receives until nothing comes, deleting each message received."""
        drain(
            self.sg,
            lambda: self._run(0, None, self._sg_receive(10)),
            lambda handle, h: self._run(0, None, self._sg_delete(handle, h)),
        )

    def _sg_at_rest(self) -> None:
        """The clock past every timeout, the queue drained (each message received is
        deleted); then each message whose send answered a new id was deleted."""
        if not self.sg_ready:
            return
        self._sg_no_stall()
        for _ in range(3):
            self.clock.advance(max(CHANGES_S) + 1)
            self._sg_drain()
        for body, m in self.sg.msgs.items():
            if m.required and not m.deleted:
                self._violate("lost", f"{body} ({m.group}) was never deleted")


def _recheck_bound_passed(broker: Any) -> None:
    """A container's cached FIFO waits (queue_plan.QueuePlanner._fifo_busy: a queue not
    re-read for at most FIFO_RECHECK_MAX_SECONDS of real time) as once that bound passed."""
    planner = broker.consume.check_ack.__self__._planner
    with planner._lock:
        for key, busy in list(planner._fifo_busy.items()):
            planner._fifo_busy[key] = replace(busy, until=0.0)
