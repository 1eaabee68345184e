"""The model-based test: random histories of every move, with faults at AWS calls, two
containers interleaving, and changed inputs between a failure and its re-run; after every
step the reference model (model.py) judges what the broker answered and what it holds.

Each step runs on container 0 or 1 (separate caches, one moto backend, one clock), with an
optional fault at its n-th AWS call (faults.py). ``interleave`` pauses one operation before
its n-th AWS call, runs another one on the other container, then lets the first go on.
A failed request is re-run later by the steps that follow (a resend with the same stamp, a
commit again, the next receive re-running an expiry move, ...) after whatever else happened.
At the end the history is brought to rest (resends, the clock moved past every delay and
backoff, the scheduler run, every group drained) and nothing may be missing.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cirrusmq_broker import limits
from cirrusmq_broker.errors import (
    AlreadyDelivered,
    BrokerError,
    LeaseMovedOn,
    ScheduledMessageNotFound,
    TransactionAlreadyEnded,
)
from cirrusmq_broker.model import MessageInput, ProducerStamp, ReceivedMessage, StoredMessage
from cirrusmq_broker.rules.transaction_state import Resolution
from cirrusmq_broker.services.consume_produce import Step
from faults import INJECTOR, KINDS, Crash, Fault
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from model import INVARIANTS, Delivery, GroupModel, Msg, Txn, violation_type
from moves_rules import MoveRules
from world import World

TOPICS = {"n": ("NORMAL", 2), "f": ("FIFO", 2), "x": ("TRANSACTION", 2)}
GROUPS = {"g1": ("n", "f", "x"), "g2": ("n",)}
MAX_ATTEMPTS = {"g1": 2, "g2": 3}
PAIRS = [(g, t) for g, topics in GROUPS.items() for t in topics]
PRODUCER_GROUP, TRANSACTIONAL_ID = "pg", "p1"
ADVANCES_S = (1, 2, 5, 11, 31, 61, 125)
OPS = (
    "send",
    "resend",
    "receive",
    "ack",
    "ack_on_receive",
    "nack",
    "change_invisible",
    "cancel",
    "tick",
    "checks",
    "txn_send",
    "commit",
    "rollback",
    "redrive",
    "redrive_id",
    "advance",
    "step",
)

RACES = (
    ("receive", "ack"),  # an ack inside the move of its expired lease
    ("receive", "change_invisible"),
    ("receive", "nack"),
    ("nack", "receive"),
    ("ack", "receive"),
    ("receive", "ack_on_receive"),  # acks riding on a receive inside another's move
    ("tick", "cancel"),  # a cancel inside the scheduler's move
    ("commit", "txn_send"),  # a part send inside its commit
    ("redrive", "redrive_id"),
    ("redrive_id", "redrive"),
    ("receive", "receive"),
    ("resend", "resend"),
)
"""Pairs the issue names: the second runs while the first is paused at an AWS call."""
LEASE_RACES = tuple(pair for pair in RACES if "receive" in pair and pair != ("receive", "receive"))
RERUNS = (
    ("receive", "ack"),  # a failed expiry move, an ack, the move again
    ("receive", "change_invisible"),
    ("receive", "advance"),
    ("nack", "receive"),
    ("tick", "cancel"),
    ("tick", "advance"),
    ("send", "advance"),  # a failed delayed send, the clock past its due time, the resend
    ("commit", "txn_send"),
    ("redrive", "redrive_id"),
    ("redrive_id", "redrive"),
    ("txn_send", "commit"),
)
"""Pairs the issue names: the first fails, the second runs, the first is re-run."""
RACES_AT_WRITE = (
    ("receive", "ack"),  # an ack inside the expiry move of its lease
    ("receive", "change_invisible"),
    ("receive", "nack"),
    ("nack", "receive"),  # the lease expires and moves on inside a nack's move
    ("tick", "cancel"),  # a cancel inside a release
    ("cancel", "tick"),  # a release inside a cancel
    ("tick", "tick"),  # two release runs
    ("commit", "txn_send"),  # a late part inside its commit
    ("txn_send", "commit"),  # a commit inside a part's send
    ("redrive", "redrive_id"),
    ("redrive_id", "redrive"),
    ("redrive", "redrive"),
    ("send", "resend"),  # a resend while its original is paused
)
"""Races of ``race_at_write``: the first request pauses right before the write that
carries its guard (its TransactWriteItems, or a send's plain writes), the second changes
what the first read."""
SEND_WRITES = (("PutItem", 1), ("PutItem", 0), ("UpdateItem", 0))
"""Where a send pauses in ``race_at_write`` (by ``nth``): its append is plain conditional
writes, no transaction: the index item's put (after the claim), the claim's put, the
head's move."""
EXPIRY_RACES_AT_WRITE = tuple(p for p in RACES_AT_WRITE if "receive" in p)
"""The races of a lease request (ack, change_invisible, nack) and an expiry move."""
COMMIT_RACES_AT_WRITE = (
    ("commit", "txn_send"),
    ("txn_send", "commit"),
    ("commit", "rollback"),  # a rollback inside a commit's transition
    ("rollback", "commit"),
)
"""The races of ``race_at_commit``: a commit with a part of its transaction, or with its
rollback (both read it OPEN; one transition only may land)."""

faults = st.one_of(
    st.none(),
    st.builds(
        Fault, at=st.one_of(st.integers(0, 4), st.integers(0, 14)), kind=st.sampled_from(KINDS)
    ),
)
picks = st.integers(0, 63)
containers = st.integers(0, 1)


@dataclass
class Op:
    """One request: what it is, the call, and how its answer updates the model."""

    what: str
    call: Callable[[Any], Any]
    apply: Callable[[str, Any], None]
    """(outcome: ok / error / crash, the result or the error)."""
    moves_groups: bool = True
    """It may change a group's state or dead letters (checked after the step)."""
    in_flight: Callable[[], Callable[[], None]] | None = None
    """While it is paused part-way (``interleave``) it may have taken effect already:
    marks that in the model for the other request's checks; returns the undo."""


@dataclass
class Stats:
    histories: int = 0
    steps: int = 0
    faults: int = 0
    violations: list[tuple[str, str]] = field(default_factory=list)
    """Violations of muted kinds: (kind, the history that showed it)."""


def copy_of(message: StoredMessage) -> tuple:
    """Which copy of a message this is: where it was first stored (a retry, a dead letter
    and a redriven letter keep that origin)."""
    system = message.system
    if system.origin_offset is not None:
        return (message.body, system.origin_topic, system.origin_queue, system.origin_offset)
    return (message.body, message.topic, message.queue, message.offset)


NACK_SUSPEND_MS = limits.MIN_INVISIBLE_SECONDS * 1000
"""A FIFO nack without a delay suspends its delivery this long."""


def lease_of(handle: str) -> tuple:
    """(topic, queue, lease id) a receipt handle names (its payload is signed, not secret)."""
    payload = handle.split(".")[0]
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return (fields[1], fields[2], fields[4])


class ReliabilityMachine(MoveRules, RuleBasedStateMachine):
    """Random histories of the broker's moves against the reference model."""

    raise_kinds: ClassVar[frozenset[str] | None] = None
    """Invariant kinds that fail the history (None: all); the others are only recorded."""
    stats: ClassVar[Stats] = Stats()
    dead_letters_aimed: ClassVar[bool] = True
    """Whether ``dead_letter`` sets up FIFO dead letters (in every run; an aimed search
    whose weights leave the rule out turns it off)."""

    def __init__(self) -> None:
        super().__init__()
        self.stats.histories += 1
        self.world = World()
        self.n = self.world.name
        self.clock = self.world.clock
        self.msgs: dict[bytes, Msg] = {}
        self.groups = {g: GroupModel(g, topics) for g, topics in GROUPS.items()}
        self.txns: dict[int, Txn] = {}
        self.pending: list[tuple[str, list[MessageInput], ProducerStamp]] = []
        self.pending_steps: list[tuple[Step, str, Delivery, Msg]] = []
        """Exactly-once steps whose commit failed (committed or not): retried as they were."""
        self.step_sequence = 0
        self.delivered_any: set[bytes] = set()
        self.log: list[str] = []
        self.counter = 0
        self.sequence = 0
        self.fifo_seq = Counter[str]()
        self.resets = 0
        self.dirty = True
        self.generation = 0
        self.redriven_letters: set[tuple[str, int]] = set()
        self.unfinished_redrives: list[tuple[str, bytes | None]] = []
        """Redrives that failed (group, the body redriven by id or None for a cursor)."""
        self.answered_parts: set[tuple[str, int]] = set()
        """(transaction, part) whose send answered stored."""
        self.violated = False
        """A step raised a violation: the history is closed, not brought to rest."""
        try:
            self._setup()
        except BaseException:
            self.world.close()
            raise

    def _setup(self) -> None:
        broker = self.world.brokers[0]
        for name, (kind, queues) in TOPICS.items():
            broker.admin.create_topic(self.n(name), queues=queues, message_type=kind)
        for group, attempts in MAX_ATTEMPTS.items():
            broker.retries.set_max_delivery_attempts(self.n(group), attempts)
        for group, topic in PAIRS:  # subscribed before anything is sent
            broker.consume.receive(self.n(group), self.n(topic), max_messages=1)
        self.epoch = broker.transactions.register(self.n(PRODUCER_GROUP), TRANSACTIONAL_ID)
        self._moves_setup(broker)

    # ================================================================== running requests
    def _run(self, b: int, fault: Fault | None, op: Op | None) -> None:
        if op is None:
            return
        INJECTOR.arm(fault)
        outcome, value = self._call(b, op)
        fired = INJECTOR.fired
        INJECTOR.disarm()
        self.dirty = self.dirty or op.moves_groups
        self._after(f"[{b}] {op.what}", fired, outcome, value)
        op.apply(outcome, value)

    def _call(self, b: int, op: Op) -> tuple[str, Any]:
        try:
            return "ok", op.call(self.world.brokers[b])
        except Crash:
            self.world.restart(b)
            return "crash", None
        except Exception as exc:  # noqa: BLE001 - judged in _after
            return "error", exc

    def _after(self, what: str, fired: str | None, outcome: str, value: Any) -> None:
        self.stats.steps += 1
        if fired:
            self.stats.faults += 1
        shown = _show(value) if outcome == "ok" else repr(value)[:160]
        self.log.append(f"{what}{' !' + fired if fired else ''} -> {outcome} {shown}")
        if outcome == "error" and fired is None and not isinstance(value, BrokerError):
            self._violate("internal-error", f"{what}: {value!r}")

    def _interleave(
        self,
        b: int,
        first: Op | None,
        at: int,
        second: Op | None,
        before: tuple[str, int] | None = None,
    ) -> None:
        """``first`` on container b, paused before its ``at``-th AWS call (or, with
        ``before`` = (operation, n), before its n-th call of that AWS operation) while
        ``second`` runs to its end on the other container; then ``first`` goes on."""
        if first is None or second is None:  # nothing to interleave: what there is runs
            self._run(b, None, first)
            self._run(1 - b, None, second)
            return
        done = threading.Event()
        armed = threading.Event()
        result: dict[str, Any] = {}

        def run_first() -> None:
            if before is None:
                INJECTOR.arm(None, pause_at=at)
            else:
                INJECTOR.arm(None, pause_before=before[0], pause_skip=before[1])
            armed.set()
            try:
                result["first"] = self._call(b, first)
            finally:
                result["fired"] = INJECTOR.fired
                done.set()

        self.dirty = True
        thread = threading.Thread(target=run_first, name="first")
        thread.start()
        armed.wait(10)
        while not (INJECTOR.paused.is_set() or done.is_set()):
            done.wait(0.001)
        paused = INJECTOR.paused.is_set() and not done.is_set()
        undo = first.in_flight() if paused and first.in_flight is not None else None
        if paused:
            first_thread = INJECTOR.thread
            INJECTOR.thread = threading.get_ident()
            outcome2, value2 = self._call(1 - b, second)
            INJECTOR.thread = first_thread
            INJECTOR.resume.set()
        thread.join(60)
        INJECTOR.disarm()
        where = f"call {at}" if before is None else f"{before[0]} #{before[1]}"
        tag = f"paused before {where}" if paused else "ran to its end first"
        if paused:
            self._after(
                f"[{1 - b}] {second.what} (while [{b}] {first.what} {tag})", None, outcome2, value2
            )
            second.apply(outcome2, value2)
        if undo is not None:
            undo()
        outcome1, value1 = result["first"]
        self._after(f"[{b}] {first.what} ({tag})", result.get("fired"), outcome1, value1)
        first.apply(outcome1, value1)
        if not paused:  # nothing to interleave with: the second runs after
            self._run(1 - b, None, second)

    def _violate(self, kind: str, detail: str) -> None:
        history = "\n".join(f"  {i:3}. {line}" for i, line in enumerate(self.log))
        text = f"{kind}: {INVARIANTS[kind]}\n  {detail}\nhistory:\n{history}"
        if self.raise_kinds is None or kind in self.raise_kinds:
            self.violated = True
            raise violation_type(kind)(text)
        self.stats.violations.append((kind, text))

    # ================================================================== the operations
    def _op(self, name: str, p: int, q: int) -> Op | None:
        return getattr(self, f"_op_{name}")(p, q)

    def _new_body(self) -> tuple[bytes, str]:
        self.counter += 1
        return f"m{self.counter}".encode(), f"id-{self.counter}"

    def _op_send(self, p: int, q: int) -> Op:
        topic = "f" if p % 3 == 0 else "n"
        stamped = (p // 3) % 2 == 0
        count = 1 + q % 3
        delay = (q // 3) % 3 if topic == "n" else 0  # none, all, the last one
        delay_ms = (2 + (p % 5) * 3) * 1000
        now = self.clock()
        inputs, msgs = [], []
        for i in range(count):
            body, mid = self._new_body()
            due = now + delay_ms if delay == 1 or (delay == 2 and i == count - 1) else 0
            key = f"k{q % 2}" if topic == "f" else None
            inputs.append(
                MessageInput(
                    body, message_id=mid, message_group=key, delivery_timestamp=due or None
                )
            )
            msgs.append(Msg(body, topic, mid, "maybe", due=due, group_key=key))
        for m in msgs:
            self.msgs[m.body] = m
        stamp = None
        if stamped:
            self.sequence += 1
            stamp = ProducerStamp(self.n("producer"), self.sequence)

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                for m in msgs:
                    m.status = "certain"
                    if m.group_key is not None:
                        self.fifo_seq[m.group_key] += 1
                        m.fifo_seq = self.fifo_seq[m.group_key]
            elif stamp is not None:
                for m in msgs:
                    m.status = "pending"
                self.pending.append((topic, inputs, stamp))

        what = f"send {topic} {[m.body.decode() for m in msgs]}"
        what += f" delayed {[m.due - now if m.due else 0 for m in msgs]} ms" if delay else ""
        what += f" stamp {stamp.sequence}" if stamp else ""
        return Op(
            what,
            lambda broker: broker.produce.send(self.n(topic), inputs, stamp),
            apply,
            moves_groups=False,
        )

    def _op_resend(self, p: int, q: int) -> Op | None:
        if not self.pending:
            return None
        topic, inputs, stamp = self.pending[p % len(self.pending)]

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            if (topic, inputs, stamp) in self.pending:
                self.pending.remove((topic, inputs, stamp))
            for i in inputs:
                m = self.msgs[i.body]
                if m.status in ("pending", "maybe"):
                    m.status = "certain"

        what = f"resend stamp {stamp.sequence} {[i.body.decode() for i in inputs]}"
        return Op(
            what,
            lambda broker: broker.produce.send(self.n(topic), inputs, stamp),
            apply,
            moves_groups=False,
        )

    def _op_receive(self, p: int, q: int) -> Op:
        group, topic = PAIRS[p % len(PAIRS)]
        return self._receive_op(group, topic, 1 + q % 4, (10, 30, 50)[(q // 4) % 3])

    def _receive_op(
        self, group: str, topic: str, most: int, invisible: int, into: list | None = None
    ) -> Op:
        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                earlier: set[bytes] = set()  # in order within one response
                for received in value:
                    self._delivered(group, topic, received, earlier)
                    earlier.add(received.message.body)
                if into is not None:
                    into.extend(value)

        return Op(
            f"receive {group} {topic} max {most} invisible {invisible}s",
            lambda broker: broker.consume.receive(
                self.n(group), self.n(topic), max_messages=most, invisible_seconds=invisible
            ),
            apply,
        )

    def _receive_and_ack_op(self, group: str, topic: str) -> Op:
        """One container's receive of up to 4 messages, then its ack of all it got (the
        receive is recorded even when the ack fails)."""
        receive = self._receive_op(group, topic, 4, 30)
        acks: list[Any] = []

        def call(broker: Any) -> list:
            received = receive.call(broker)
            handles = [r.receipt_handle for r in received]
            try:
                acks.append(broker.consume.ack(self.n(group), handles) if handles else [])
            except Exception as exc:  # noqa: BLE001 - an ack that failed may have acked
                acks.append(exc)
            return received

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            receive.apply("ok", value)
            gm = self.groups[group]
            if isinstance(acks[0], Exception):
                if not isinstance(acks[0], BrokerError):  # as _after judges a request's
                    self._violate("internal-error", f"the ack after {receive.what}: {acks[0]!r}")
                gm.maybe_acked.update(r.message.body for r in value)
                return
            delivered = [gm.latest[r.message.body] for r in value]
            self._ack_op(group, delivered).apply("ok", acks[0])

        return Op(f"receive {group} {topic} max 4 invisible 30s, ack all it got", call, apply)

    def _live(self, stale_too: bool) -> list[tuple[str, Delivery]]:
        found = []
        for g, gm in self.groups.items():
            for d in gm.deliveries:
                if d.retired or d.body in gm.acked:
                    continue
                if stale_too or gm.latest.get(d.body) is d:
                    found.append((g, d))
        return found

    def _op_ack(self, p: int, q: int) -> Op | None:
        live = self._live(stale_too=q % 3 == 2)
        if not live:
            return None
        group, d = live[p % len(live)]
        chosen = [d] + [other for g, other in live if g == group and other is not d and q % 2][:1]

        def apply(outcome: str, value: Any) -> None:
            gm = self.groups[group]
            if outcome != "ok":
                gm.maybe_acked.update(x.body for x in chosen)
                return
            for x, result in zip(chosen, value, strict=True):
                if result.status.value == "acked":
                    self._acked(group, x)

        what = f"ack {group} {[f'{x.body.decode()}#{x.attempt}' for x in chosen]}"
        return Op(
            what,
            lambda broker: broker.consume.ack(self.n(group), [x.handle for x in chosen]),
            apply,
            in_flight=self._acks_in_flight(group, chosen),
        )

    def _acks_in_flight(self, group: str, ds: list[Delivery]) -> Callable[[], Callable[[], None]]:
        """An ack paused part-way may have acked some of its messages already: they count
        as maybe acked until it answers."""

        def mark() -> Callable[[], None]:
            gm = self.groups[group]
            added = {d.body for d in ds} - gm.maybe_acked
            gm.maybe_acked |= added
            return lambda: gm.maybe_acked.difference_update(added)

        return mark

    def _op_ack_on_receive(self, p: int, q: int) -> Op | None:
        """A receive carrying acks (the receive route's ``ack``): the acks run through the
        ack service in the receive's ``before_receive`` hook, once the receive is checked;
        a failure anywhere fails it all, and then any of the acks may have landed."""
        acking = self._op_ack(p, q)
        if acking is None:
            return None
        group = acking.what.split()[1]
        topic = GROUPS[group][q % len(GROUPS[group])]
        most = 1 + q % 4
        receiving = self._receive_op(group, topic, most, 30)
        acked: list[Any] = []

        def ack_first(broker: Any) -> int:
            acked.append(acking.call(broker))
            return 0

        def call(broker: Any) -> tuple[Any, Any]:
            acked.clear()
            received = broker.consume.receive(
                self.n(group),
                self.n(topic),
                max_messages=most,
                invisible_seconds=30,
                before_receive=lambda: ack_first(broker),
            )
            return acked[0], received

        def apply(outcome: str, value: Any) -> None:
            acking.apply(outcome, value[0] if outcome == "ok" else value)
            if outcome == "ok":
                receiving.apply(outcome, value[1])

        return Op(
            f"{receiving.what} carrying {acking.what}", call, apply, in_flight=acking.in_flight
        )

    def _op_nack(self, p: int, q: int) -> Op | None:
        live = self._live(stale_too=False)
        if not live:
            return None
        group, d = live[p % len(live)]
        return self._nack_op(group, d)

    def _nack_op(self, group: str, d: Delivery) -> Op:
        def apply(outcome: str, value: Any) -> None:
            gm = self.groups[group]
            if outcome == "ok" and value[0].status != "acked":
                return
            d.retired = True
            gm.visible_at.pop(d.body, None)
            gm.copy_visible_at.pop(d.copy, None)
            # FIFO: the nack suspends the whole delivery (10 s) unless it dead-lettered
            # the message: its other messages come back then at the earliest
            self._move_lease(group, d, self.clock() + NACK_SUSPEND_MS, exact=False)

        return Op(
            f"nack {group} {d.body.decode()}#{d.attempt}",
            lambda broker: broker.retries.nack(self.n(group), [d.handle]),
            apply,
        )

    def _op_change_invisible(self, p: int, q: int) -> Op | None:
        live = self._live(stale_too=False)
        if not live:
            return None
        group, d = live[p % len(live)]
        seconds = (10, 30, 50)[q % 3]
        gm = self.groups[group]
        before: dict[bytes, int] = {}  # paused part-way (interleave): the deadlines then

        def pause() -> Callable[[], None]:
            before.update(gm.visible_at)
            return lambda: None

        def moved_meanwhile(until: int) -> int:
            """A change paused across another request that moved this delivery's deadline
            (a nack's suspension, another change) may have written before it: the delivery
            ends at the earlier of the two (a nack's message: its suspension's end)."""
            if not before:
                return until
            keys = [
                x.body for x in gm.latest.values() if x is d or (d.lease and x.lease == d.lease)
            ]
            suspended = self.clock() + NACK_SUSPEND_MS
            moved = [
                gm.visible_at.get(k, suspended)
                for k in keys
                if gm.visible_at.get(k) != before.get(k)
            ]
            return min([until, *moved])

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                d.retired = True
                until = moved_meanwhile(value.invisible_until)
                new = Delivery(
                    d.body,
                    d.topic,
                    value.receipt_handle,
                    d.attempt,
                    until,
                    step=len(self.log),
                    via_allowance=d.via_allowance,
                    copy=d.copy,  # the same copy: a nack or ack through the new handle ends it
                    lease=d.lease,
                )
                gm.deliveries.append(new)
                gm.latest[d.body] = new
                gm.visible_at[d.body] = until
                gm.copy_visible_at[d.copy] = until
                self._move_lease(group, d, until, exact=True)
            elif not isinstance(value, BrokerError) or value.__class__.__name__ not in (
                "ReceiptHandleExpired",
            ):
                d.retired = True
                until = self.clock() + seconds * 1000  # at the earliest: it may have landed
                for seen, key in ((gm.visible_at, d.body), (gm.copy_visible_at, d.copy)):
                    seen[key] = min(seen.get(key, 0), until)
                self._move_lease(group, d, until, exact=False)

        return Op(
            f"change_invisible {group} {d.body.decode()}#{d.attempt} {seconds}s",
            lambda broker: broker.consume.change_invisible(self.n(group), d.handle, seconds),
            apply,
            in_flight=pause,
        )

    def _move_lease(self, group: str, d: Delivery, deadline: int, *, exact: bool) -> None:
        """The other live messages of ``d``'s FIFO delivery (its lease) now end their
        invisible time at ``deadline`` (``exact``: the broker answered it; else at the
        earliest, as the change may not have landed, or may have left them as they were)."""
        if d.lease is None:
            return
        gm = self.groups[group]
        # each message's latest delivery, retired ones too: a failed change retires the
        # handle it used (it may have been replaced), not the message's place in the lease
        for x in list(gm.latest.values()):
            if x is d or x.lease != d.lease:
                continue
            if exact:
                x.deadline = deadline
                gm.visible_at[x.body] = deadline
                gm.copy_visible_at[x.copy] = deadline
            else:
                for seen, key in ((gm.visible_at, x.body), (gm.copy_visible_at, x.copy)):
                    if key in seen:
                        seen[key] = min(seen[key], deadline)

    def _op_cancel(self, p: int, q: int) -> Op | None:
        delayed = [m for m in self.msgs.values() if m.due and m.status != "cancelled"]
        if not delayed:
            return None
        m = delayed[p % len(delayed)]

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                if m.body in self.delivered_any:
                    self._violate(
                        "cancelled-delivered",
                        f"cancel of {m.body!r} answered success after its delivery",
                    )
                m.status = "cancelled"
            elif m.status == "certain" and not isinstance(
                value, AlreadyDelivered | ScheduledMessageNotFound
            ):
                m.status = "maybe-cancelled"

        return Op(
            f"cancel {m.body.decode()} due +{m.due - self.clock()}ms",
            lambda broker: broker.delay_cancel.cancel(self.n(m.topic), m.message_id, m.due),
            apply,
            moves_groups=False,
        )

    def _op_step(self, p: int, q: int) -> Op | None:
        """An exactly-once step: ack one delivery (sometimes a stale one) and send one
        message derived from it to topic n, in one commit."""
        live = self._live(stale_too=q % 3 == 2)
        if not live:
            return None
        group, d = live[p % len(live)]
        body, mid = self._new_body()
        out = Msg(body, "n", mid, "pending")
        self.msgs[body] = out
        self.step_sequence += 1
        request = Step(
            producer_group=self.n(PRODUCER_GROUP),
            transactional_id=TRANSACTIONAL_ID,
            epoch=self.epoch,
            sequence=self.step_sequence,
            group=self.n(group),
            receipt_handles=(d.handle,),
            outputs=((self.n("n"), (MessageInput(body, message_id=mid),)),),
        )
        return self._step_op(request, group, d, out)

    def _step_op(self, request: Step, group: str, d: Delivery, out: Msg) -> Op:
        """A step's commit (or its retry, the very request again). Its answer is the truth
        of both effects: committed (the ack and the message) or refused (neither); a failed
        one is retried later (at rest at the latest). Until then its message is not assumed
        stored, so a message without its ack shows, and its ack counts as maybe done (the
        commit may have landed before the failure): the group's next FIFO message may come,
        and a retry answering the first commit (``duplicate``) is an ack made back then,
        not one through a handle an offset reset dropped since."""
        gm = self.groups[group]

        def apply(outcome: str, value: Any) -> None:
            entry = (request, group, d, out)
            settled = outcome == "ok" or isinstance(value, LeaseMovedOn)
            if settled and entry in self.pending_steps:
                self.pending_steps.remove(entry)
            if outcome == "ok":
                out.status = "certain"
                self._acked(group, d)
            elif isinstance(value, LeaseMovedOn):
                if out.status != "certain":  # a retry after a commit answers it: never here
                    out.status = "rolled-back"
            elif entry not in self.pending_steps:
                self.pending_steps.append(entry)
            maybe = {e[2].body for e in self.pending_steps if e[1] == group}
            gm.step_maybe_acked, gone = maybe, gm.step_maybe_acked - maybe
            gm.maybe_acked |= maybe
            gm.maybe_acked -= gone  # answered: acked (then in ``acked``) or refused

        return Op(
            f"step {group} ack {d.body.decode()}#{d.attempt} send {out.body.decode()} "
            f"seq {request.sequence}",
            lambda broker: broker.consume_produce.commit(request),
            apply,
            in_flight=self._acks_in_flight(group, [d]),
        )

    def _op_step_retry(self, p: int, q: int) -> Op | None:
        if not self.pending_steps:
            return None
        return self._step_op(*self.pending_steps[p % len(self.pending_steps)])

    def _op_tick(self, p: int, q: int) -> Op:
        looping = p % 2 == 1  # the loop's tick: prepares what is due within 150 ms
        sleep = self.clock.until if looping else None
        return Op(
            f"scheduler tick{' (loop)' if looping else ''}",
            lambda broker: broker.delay_release.tick(sleep_until=sleep),
            lambda outcome, value: None,
            moves_groups=False,
        )

    def _op_checks(self, p: int, q: int) -> Op:
        return Op(
            "checker pass",
            lambda broker: broker.transactions.run_checks(),
            lambda outcome, value: None,
            moves_groups=False,
        )

    def _txn(self, p: int) -> Txn:
        slot = p % 3
        txn = self.txns.get(slot)
        if txn is None or txn.state in ("committed", "rolled-back"):
            self.generation += 1
            txn = self.txns[slot] = Txn(f"t{self.generation}")
        return txn

    def _op_txn_send(self, p: int, q: int) -> Op:
        txn = self._txn(p)
        if txn.failed_parts and q % 2 == 0:
            failed = sorted(txn.failed_parts)
            return self._part_send_op(txn, failed[(q // 2) % len(failed)])
        part = txn.next_part
        txn.next_part += 1
        txn.parts[part] = []
        for _ in range(1 + q % 2):
            body, mid = self._new_body()
            self.msgs[body] = Msg(body, "x", mid, "half", txn=txn.txid)
            txn.parts[part].append(body)
        return self._part_send_op(txn, part)

    def _part_send_op(self, txn: Txn, part: int) -> Op:
        """The send (or resend) of ``part`` of ``txn``, with its messages."""
        msgs = [self.msgs[b] for b in txn.parts[part]]
        inputs = [MessageInput(m.body, message_id=m.message_id) for m in msgs]

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                self.answered_parts.add((txn.txid, part))
                txn.failed_parts.discard(part)
                if txn.state == "committed":  # answered stored after the commit: part of it
                    for m in msgs:
                        m.status = "committed"
            elif isinstance(value, TransactionAlreadyEnded):
                for m in msgs:  # refused: not part of the transaction, never visible
                    if m.status in ("half", "maybe-committed"):
                        m.status = "rolled-back"
            else:
                txn.failed_parts.add(part)
                if txn.state in ("committed", "maybe-committed"):
                    for m in msgs:
                        if m.status == "half":
                            m.status = "maybe-committed"

        return Op(
            f"txn send {txn.txid} part {part} {[m.body.decode() for m in msgs]}",
            lambda broker: broker.transactions.send(
                self.n(PRODUCER_GROUP),
                txn.txid,
                transactional_id=TRANSACTIONAL_ID,
                epoch=self.epoch,
                topic_name=self.n("x"),
                inputs=inputs,
                part=part,
            ),
            apply,
        )

    def _txn_msgs(self, txn: Txn) -> list[Msg]:
        return [self.msgs[b] for bodies in txn.parts.values() for b in bodies]

    def _op_commit(self, p: int, q: int) -> Op | None:
        txn = self.txns.get(p % 3)
        if txn is None or not txn.parts or txn.state in ("committed", "rolled-back"):
            return None

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                txn.state = "committed"
                for part, bodies in txn.parts.items():
                    # a part is surely committed only if its send answered before the commit
                    fine = (txn.txid, part) in self.answered_parts and part not in txn.failed_parts
                    for m in (self.msgs[b] for b in bodies):
                        if m.status in ("half", "maybe-committed"):
                            m.status = "committed" if fine else "maybe-committed"
            elif isinstance(value, TransactionAlreadyEnded):
                self._rolled_back(txn)
            else:
                txn.state = "maybe-committed"
                for m in self._txn_msgs(txn):
                    if m.status == "half":
                        m.status = "maybe-committed"

        return Op(
            f"commit {txn.txid}",
            lambda broker: broker.transactions.end(
                self.n(PRODUCER_GROUP),
                txn.txid,
                Resolution.COMMIT,
                producer=(TRANSACTIONAL_ID, self.epoch),
            ),
            apply,
        )

    def _op_rollback(self, p: int, q: int) -> Op | None:
        txn = self.txns.get(p % 3)
        if txn is None or not txn.parts or txn.state in ("committed", "rolled-back"):
            return None

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                self._rolled_back(txn)
            elif isinstance(value, TransactionAlreadyEnded) and txn.state == "maybe-committed":
                txn.state = "committed"
                for m in self._txn_msgs(txn):
                    m.status = "committed" if m.status == "half" else m.status

        return Op(
            f"rollback {txn.txid}",
            lambda broker: broker.transactions.end(
                self.n(PRODUCER_GROUP),
                txn.txid,
                Resolution.ROLLBACK,
                producer=(TRANSACTIONAL_ID, self.epoch),
            ),
            apply,
        )

    def _rolled_back(self, txn: Txn) -> None:
        txn.state = "rolled-back"
        for m in self._txn_msgs(txn):
            m.status = "rolled-back"
            if m.body in self.delivered_any:
                self._violate(
                    "rolled-back-visible",
                    f"{m.body!r} of {txn.txid} was delivered, then rolled back",
                )

    def _op_redrive(self, p: int, q: int) -> Op:
        return self._redrive_op(("g1", "g2")[p % 2], None)

    def _op_redrive_id(self, p: int, q: int) -> Op | None:
        gm = self.groups[("g1", "g2")[p % 2]]
        if not gm.letter_bodies:
            return None
        offsets = sorted(gm.letter_bodies)
        return self._redrive_op(gm.name, gm.letter_bodies[offsets[q % len(offsets)]])

    def _redrive_op(self, group: str, body: bytes | None) -> Op:
        """A redrive of ``group``'s DLQ: by cursor (``body`` None) or by the message id of
        ``body``. One that fails may or may not have sent its letters back: the client
        runs it again (at rest, if nothing did before)."""
        gm = self.groups[group]
        if body is None:
            letters, ids, what = list(gm.letter_bodies), None, f"redrive {group} (cursor)"
        else:
            letters = [o for o, b in gm.letter_bodies.items() if b == body]
            ids, what = [self.msgs[body].message_id], f"redrive {group} by id {body.decode()}"

        def apply(outcome: str, value: Any) -> None:
            # the letters that reached the DLQ since the last check (within this very
            # step) are listed now, those it sent back granted as such, before any
            # delivery of their copies is judged
            self._check_storage()
            for offset in letters:
                self._grant(group, offset)
            if outcome != "ok":
                self.unfinished_redrives.append((group, body))

        def sending_back() -> Callable[[], None]:
            # paused part-way it may have appended copies already (a receive may get them):
            # granted now, as its answer grants them whatever it is
            for offset in letters:
                self._grant(group, offset)
            return lambda: None

        return Op(
            what,
            lambda broker: broker.dead_letters.redrive(self.n(group), message_ids=ids),
            apply,
            in_flight=sending_back,
        )

    def _grant(self, group: str, offset: int) -> None:
        """A letter may be sent back (once), to its own group only: one more delivery of
        its copy for that group; no other group of its topic gets it again, and the topic
        still holds the message once."""
        if (group, offset) in self.redriven_letters:
            return
        self.redriven_letters.add((group, offset))
        gm = self.groups[group]
        body = gm.letter_bodies[offset]
        gm.dead.discard(body)
        gm.dead_copies.discard(gm.letter_copies.get(offset, ()))
        gm.allowance[body] += 1
        gm.granted[body] += 1

    def _op_advance(self, p: int, q: int) -> Op:
        seconds = ADVANCES_S[p % len(ADVANCES_S)]
        return Op(
            f"clock +{seconds}s",
            lambda broker: self.clock.advance(seconds),
            lambda outcome, value: None,
            moves_groups=False,
        )

    def _op_reset(self, p: int, q: int, written: range = range(0)) -> Op:
        """An offset reset; paused part-way (``interleave``) it has written the queues
        ``written`` (one transaction per queue, in order)."""
        group, topic = PAIRS[p % len(PAIRS)]
        to = ("earliest", "latest")[q % 2]
        self.resets += 1
        started = len(self.log)

        def rewinding() -> Callable[[], None]:
            gm = self.groups[group]
            gm.rewound[topic] = set(written)
            return lambda: gm.rewound.pop(topic, None)

        def apply(outcome: str, value: Any) -> None:
            gm = self.groups[group]
            bodies = {b for b, m in self.msgs.items() if m.topic == topic}
            gm.exempt |= bodies
            if outcome == "ok" and to == "earliest":  # to latest: old offsets are committed,
                gm.reset_at[topic] = started  # and an ack of a committed offset answers acked
            if to == "latest" or outcome != "ok":
                gm.excused |= bodies
            for key in list(gm.committed):
                if key[0] == self.n(topic) or key[0].endswith(f".{self.n(topic)}"):
                    del gm.committed[key]

        return Op(
            f"reset {group} {topic} to {to}",
            lambda broker: broker.offset_reset.reset(self.n(group), self.n(topic), to),
            apply,
            in_flight=rewinding,
        )

    # ================================================================== the rules
    @initialize(b=containers, p=picks, q=picks)
    def start_with_messages_in_flight(self, b: int, p: int, q: int) -> None:
        """Every history starts with messages stored, some delayed, some leased, and an open
        transaction: the moves have something to move from the first step on."""
        self._run(b, None, self._op_send(1, 2 + 3 * (q % 3)))  # NORMAL, stamped
        self._run(1 - b, None, self._op_send(0, 1 + q))  # FIFO, stamped
        self._run(b, None, self._op_send(4, 5))  # NORMAL, unstamped, the last one delayed
        self._run(b, None, self._op_txn_send(p, 1))
        self._run(1 - b, None, self._receive_op("g1", "n", 2 + p % 3, 10))
        self._run(b, None, self._receive_op("g2", "n", 2, 10 + 20 * (q % 2)))
        self._run(1 - b, None, self._receive_op("g1", "f", 2, 10))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def send(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_send(p, q))

    @precondition(lambda self: self.pending)
    @rule(b=containers, p=picks, fault=faults)
    def resend(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_resend(p, 0))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def receive(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_receive(p, q))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def ack(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_ack(p, q))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def ack_on_receive(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_ack_on_receive(p, q))

    @rule(b=containers, p=picks, fault=faults)
    def nack(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_nack(p, 0))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def change_invisible(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_change_invisible(p, q))

    @rule(b=containers, p=picks, fault=faults)
    def cancel(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_cancel(p, 0))

    @rule(b=containers, p=picks, fault=faults)
    def tick(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_tick(p, 0))

    @rule(b=containers, fault=faults)
    def checks(self, b: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_checks(0, 0))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def txn_send(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_txn_send(p, q))

    @rule(b=containers, p=picks, fault=faults)
    def commit(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_commit(p, 0))

    @rule(b=containers, p=picks, fault=faults)
    def rollback(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_rollback(p, 0))

    @rule(b=containers, p=picks, fault=faults)
    def redrive(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_redrive(p, 0))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def redrive_id(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_redrive_id(p, q))

    @rule(b=containers, p=picks, q=picks, fault=faults)
    def step(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_step(p, q))

    @precondition(lambda self: self.pending_steps)
    @rule(b=containers, p=picks, fault=faults)
    def step_retry(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_step_retry(p, 0))

    @precondition(lambda self: self.resets < 1)
    @rule(b=containers, p=picks, q=picks, fault=faults)
    def reset(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._op_reset(p, q))

    @precondition(lambda self: self.resets < 1)
    @rule(b=containers, p=picks, most=st.integers(1, 4), nth=st.integers(0, 1))
    def race_at_reset(self, b: int, p: int, most: int, nth: int) -> None:
        """A send of three messages to n, then an offset reset of a group on n to earliest
        (the one judged: ``reset_at``) paused before its ``nth`` write (one
        TransactWriteItems per queue, in order) while a receive of that group and topic
        saves their summaries and leases; then the receiver acks what it got. On a queue the
        reset had not written yet, the reset must read again and drop that lease too; on one
        it had, the lease is after the reset, and what the receive gets from it is
        delivered anew (``rewound``)."""
        pair = PAIRS.index((("g1", "g2")[p % 2], "n"))  # n: what a receive may get at once
        group, topic = PAIRS[pair]
        self._run(b, None, self._op_send(1, 2))  # three more of n, none delayed
        received: list[ReceivedMessage] = []
        receiving = self._receive_op(group, topic, most, 30, received)
        reset = self._op_reset(pair, 0, written=range(nth))
        self._interleave(b, reset, 0, receiving, before=("TransactWriteItems", nth))
        gm = self.groups[group]
        if "(paused before" in self.log[-1] and topic in gm.reset_at:
            gm.reset_dropped |= {r.receipt_handle for r in received if r.message.queue >= nth}
        by_handle = {d.handle: d for d in gm.deliveries}
        held = [by_handle[r.receipt_handle] for r in received if r.receipt_handle in by_handle]
        if held:  # dropped leases must answer expired
            self._run(1 - b, None, self._ack_op(group, held))

    @rule(p=st.integers(0, len(ADVANCES_S) - 1))
    def advance(self, p: int) -> None:
        self.clock.advance(ADVANCES_S[p])
        self.log.append(f"clock +{ADVANCES_S[p]}s")

    @rule(
        b=containers,
        first=st.sampled_from(OPS),
        p1=picks,
        q1=picks,
        at=st.integers(0, 14),
        second=st.sampled_from(OPS),
        p2=picks,
        q2=picks,
    )
    def interleave(
        self, b: int, first: str, p1: int, q1: int, at: int, second: str, p2: int, q2: int
    ) -> None:
        self._interleave(b, self._op(first, p1, q1), at, self._op(second, p2, q2))

    @rule(b=containers, p=picks, q=picks, at=st.integers(0, 6))
    def stale_receive(self, b: int, p: int, q: int, at: int) -> None:
        """A receive pauses before its ``at``-th AWS call while the other container receives
        from the same group and topic and acks all it got; then the first goes on. What it
        read before the pause is stale: its save must fail as a whole and leave nothing
        that hands the acked messages out again."""
        group, topic = PAIRS[p % len(PAIRS)]
        first = self._op_receive(p, q)
        self._interleave(b, first, at, self._receive_and_ack_op(group, topic))

    @rule(
        b=containers,
        first=st.sampled_from(OPS),
        p1=picks,
        q1=picks,
        fault=faults,
        second=st.sampled_from(OPS),
        p2=picks,
        q2=picks,
    )
    def rerun_after_change(
        self,
        b: int,
        first: str,
        p1: int,
        q1: int,
        fault: Fault | None,
        second: str,
        p2: int,
        q2: int,
    ) -> None:
        """A request fails; something else happens; the request is re-run (a send is
        resent with its stamp, a move is re-run by the next request that makes it)."""
        pending = len(self.pending)
        self._run(b, fault, self._op(first, p1, q1))
        self._run(1 - b, None, self._op(second, p2, q2))
        if first == "send":
            if len(self.pending) > pending:
                self._run(b, None, self._op_resend(len(self.pending) - 1, 0))
        else:
            self._run(b, None, self._op(first, p1, q1 - q1 % 2))

    @rule(
        b=containers,
        pair=st.sampled_from(RACES),
        p1=picks,
        q1=picks,
        at=st.integers(0, 8),
        p2=picks,
        q2=picks,
    )
    def race(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, at: int, p2: int, q2: int
    ) -> None:
        """``interleave`` of the pairs the issue names, aimed: a receive races a request on
        a lease of its own group and topic, often once that lease has expired."""
        p1, p2 = self._aim(pair, p1, q1, p2, q2)
        self.interleave(b, pair[0], p1, q1, at, pair[1], p2, q2)

    def _aim(self, pair: tuple[str, str], p1: int, q1: int, p2: int, q2: int) -> tuple[int, int]:
        """Picks that make a receive and a lease request meet (see ``race``)."""
        on_lease = {"ack", "nack", "change_invisible"}
        if "receive" not in pair or not on_lease & set(pair):
            return p1, p2
        lease_op, lease_p, lease_q = (pair[1], p2, q2) if pair[1] in on_lease else (pair[0], p1, q1)
        live = self._live(stale_too=lease_op == "ack" and lease_q % 3 == 2)
        if not live:
            return p1, p2
        group, d = live[lease_p % len(live)]
        receive_p = PAIRS.index((group, d.topic))
        if (q1 + q2) % 3 != 2 and self.clock() <= d.deadline:  # the lease expires first
            seconds = (d.deadline - self.clock()) / 1000 + 1
            self.clock.advance(seconds)
            self.log.append(f"clock +{seconds:g}s (past the lease of {d.body.decode()})")
        return (receive_p, lease_p) if pair[0] == "receive" else (lease_p, receive_p)

    @rule(
        b=containers,
        pair=st.sampled_from(LEASE_RACES),
        p1=picks,
        q1=picks,
        at=st.integers(0, 8),
        p2=picks,
        q2=picks,
    )
    def race_on_lease(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, at: int, p2: int, q2: int
    ) -> None:
        """``race`` of a receive (its expiry move) and a request on one of its leases."""
        self.race(b, pair, p1, q1, at, p2, q2)

    @rule(
        b=containers,
        pair=st.sampled_from(RERUNS),
        p1=picks,
        q1=picks,
        fault=faults,
        p2=picks,
        q2=picks,
    )
    def rerun(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, fault: Fault | None, p2: int, q2: int
    ) -> None:
        """``rerun_after_change`` of the pairs the issue names."""
        self.rerun_after_change(b, pair[0], p1, q1, fault, pair[1], p2, q2)

    # ================================================================== aimed races
    @rule(
        b=containers,
        pair=st.sampled_from(RACES_AT_WRITE),
        p1=picks,
        q1=picks,
        p2=picks,
        q2=picks,
        nth=st.sampled_from((0, 0, 0, 1, 2)),
    )
    def race_at_write(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, p2: int, q2: int, nth: int
    ) -> None:
        """A race of ``RACES_AT_WRITE``: the first request pauses right before its
        ``nth`` TransactWriteItems (the write that carries the guard), with the state set
        up so that the second one changes what the first read."""
        first, second = self._aimed_pair(b, pair, p1, q1, p2, q2)
        before = SEND_WRITES[nth] if pair[0] == "send" else ("TransactWriteItems", nth)
        self._interleave(b, first, 0, second, before=before)

    @rule(
        b=containers,
        pair=st.sampled_from(EXPIRY_RACES_AT_WRITE),
        p1=picks,
        q1=picks,
        p2=picks,
        q2=picks,
        nth=st.sampled_from((0, 0, 0, 1)),
    )
    def race_at_expiry(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, p2: int, q2: int, nth: int
    ) -> None:
        """``race_at_write`` of a lease request and the expiry move of its lease."""
        self.race_at_write(b, pair, p1, q1, p2, q2, nth)

    @rule(
        b=containers,
        pair=st.sampled_from(COMMIT_RACES_AT_WRITE),
        p1=picks,
        q1=picks,
        p2=picks,
        q2=picks,
    )
    def race_at_commit(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, p2: int, q2: int
    ) -> None:
        """``race_at_write`` of a transaction's commit and a part of it, or its rollback."""
        self.race_at_write(b, pair, p1, q1, p2, q2, 0)

    def _aimed_pair(
        self, b: int, pair: tuple[str, str], p1: int, q1: int, p2: int, q2: int
    ) -> tuple[Op | None, Op | None]:
        if pair == ("nack", "receive"):
            return self._nack_inside_expiry(p1)
        if pair == ("send", "resend"):
            return self._send_and_resend(p1, q1)
        if "receive" in pair:
            p1, p2 = self._aim(pair, p1, q1, p2, q2)
        elif "tick" in pair:
            p1, p2 = self._aim_release(b, pair, p1, p2)
        elif "commit" in pair:
            p1 = p2 = self._aim_commit(b, p1)
        else:  # redrives: of g1, which has a dead letter
            p1, p2 = p1 - p1 % 2, p2 - p2 % 2
            if self.dead_letters_aimed and not self.groups["g1"].dead:
                self._make_dead_letter(b)
        return self._op(pair[0], p1, q1), self._op(pair[1], p2, q2)

    def _nack_inside_expiry(self, p: int) -> tuple[Op | None, Op | None]:
        """A nack of a live lease, and (while it is paused before its move) the clock past
        that lease and a receive that moves it on."""
        live = [(g, d) for g, d in self._live(stale_too=False) if d.topic != "f"]
        if not live:
            return None, None
        group, d = live[p % len(live)]
        nack = self._op_nack(self._live(stale_too=False).index((group, d)), 0)
        receiving = self._receive_op(group, d.topic, 4, 30)
        seconds = max(0, (d.deadline - self.clock()) / 1000) + 1

        def expire_and_receive(broker: Any) -> Any:
            self.clock.advance(seconds)
            return receiving.call(broker)

        return nack, Op(
            f"clock +{seconds:g}s (past the lease of {d.body.decode()}), {receiving.what}",
            expire_and_receive,
            receiving.apply,
        )

    def _send_and_resend(self, p: int, q: int) -> tuple[Op, Op]:
        """A stamped send, and a resend of it (same stamp, same messages) from the other
        container while the original is paused before its append."""
        first = self._op_send(p - p % 6 + p % 2, q)  # stamped: FIFO or NORMAL
        stamp = ProducerStamp(self.n("producer"), self.sequence)
        msgs = list(self.msgs.values())[-(1 + q % 3) :]
        topic = msgs[0].topic
        inputs = [
            MessageInput(
                m.body,
                message_id=m.message_id,
                message_group=m.group_key,
                delivery_timestamp=m.due or None,
            )
            for m in msgs
        ]

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                for m in msgs:
                    if m.status in ("pending", "maybe"):
                        m.status = "certain"

        second = Op(
            f"resend stamp {stamp.sequence} {[m.body.decode() for m in msgs]}",
            lambda broker: broker.produce.send(self.n(topic), inputs, stamp),
            apply,
            moves_groups=False,
        )
        return first, second

    def _aim_release(self, b: int, pair: tuple[str, str], p1: int, p2: int) -> tuple[int, int]:
        """A delayed message due now (sent first if there is none), and the cancel picks
        that name it."""

        def delayed() -> list[Msg]:
            return [m for m in self.msgs.values() if m.due and m.status != "cancelled"]

        waiting = [  # not yet due: surely not released yet
            m
            for m in delayed()
            if m.status in ("certain", "maybe", "pending") and m.due > self.clock()
        ]
        if not waiting:
            self._run(b, None, self._op_send(1, 3))  # NORMAL, stamped, one delayed message
            waiting = [m for m in delayed() if m.due > self.clock()][-1:]
            if not waiting:
                return p1, p2
        m = waiting[p1 % len(waiting)]
        if self.clock() < m.due:
            self.log.append(f"clock +{(m.due - self.clock()) / 1000:g}s (m due)")
            self.clock.until(m.due)
        index = delayed().index(m)
        return (index if pair[0] == "cancel" else p1, index if pair[1] == "cancel" else p2)

    def _aim_commit(self, b: int, p: int) -> int:
        """The slot of an open transaction with parts (one sent first if there is none)."""
        for slot in range(3):
            txn = self.txns.get((p + slot) % 3)
            if txn is not None and txn.state == "open" and txn.parts:
                return (p + slot) % 3
        self._run(b, None, self._op_txn_send(p, 1))
        return p % 3

    def _make_dead_letter(self, b: int) -> None:
        """Set up dead letters of g1 (2 attempts): a FIFO lease of two messages left to
        expire twice, so that its expiry moves both into one DLQ batch (a redrive by id
        and one by cursor then claim different letters of it). FIFO, which only g1
        reads: a redriven copy goes back to g1 alone."""
        group, topic = "g1", "f"
        gm = self.groups[group]
        for _ in range(5):
            received: list[ReceivedMessage] = []
            self._run(b, None, self._receive_op(group, topic, 2, 10, received))
            self._check_storage()
            if gm.dead:
                return
            if not received and not any(d.topic == topic for g, d in self._live(False)):
                self._run(b, None, self._op_send(0, 1))  # FIFO, stamped, two messages
                continue
            self.clock.advance(11)
            self.log.append("clock +11s (past the leases of g1 f)")

    @rule(b=containers, p=picks, q=picks)
    def late_ack(self, b: int, p: int, q: int) -> None:
        """An ack of a handle whose lease expired and was moved on (retry topic, DLQ, or
        redelivered in place) by another container's receive in between: the ack's slow
        path must answer ``expired``."""
        live = self._live(stale_too=False)
        if not live:
            return
        group, d = live[p % len(live)]
        if self.clock() <= d.deadline:
            seconds = (d.deadline - self.clock()) / 1000 + 1
            self.clock.advance(seconds)
            self.log.append(f"clock +{seconds:g}s (past the lease of {d.body.decode()})")
        self._run(1 - b, None, self._receive_op(group, d.topic, 1 + q % 4, 30))
        stale = self._live(stale_too=True)
        if (group, d) in stale:
            self._run(b, None, self._op_ack(stale.index((group, d)), 2))

    @precondition(lambda self: self.dead_letters_aimed and not self.groups["g1"].dead)
    @rule(b=containers)
    def dead_letter(self, b: int) -> None:
        """Dead letters to redrive (the redrive races need them)."""
        self._make_dead_letter(b)

    # ================================================================== the checks
    def _delivered(
        self, group: str, topic: str, received: ReceivedMessage, earlier: set[bytes]
    ) -> None:
        now = self.clock()
        body = received.message.body
        m = self.msgs.get(body)
        gm = self.groups[group]
        at = now - self.world.start
        what = f"{group} got {body!r} attempt {received.delivery_attempt} at +{at}ms"
        if m is None or m.topic != topic:
            self._violate("unsent-delivered", f"{what} from {topic}: never sent there")
            return
        if m.status in ("half", "rolled-back"):
            self._violate("rolled-back-visible", f"{what}: transaction part, {m.status}")
        if m.status == "cancelled":
            self._violate("cancelled-delivered", f"{what}: its cancel answered success")
        if now < m.due:
            self._violate("early", f"{what}: due at +{m.due - self.world.start}ms")
        self.delivered_any.add(body)
        via_allowance = False
        copy = copy_of(received.message)
        # Once a redrive gave this group another copy, each copy is checked on its own.
        per_copy = gm.granted[body] > 0
        if per_copy:
            acked = copy in gm.acked_copies
            dead = copy in gm.dead_copies
            visible_at = gm.copy_visible_at.get(copy, 0)
            last = gm.copy_attempt.get(copy, 0)
        else:
            acked = body in gm.acked
            dead = body in gm.dead
            visible_at = gm.visible_at.get(body, 0)
            last = gm.last_attempt.get(body, 0)
        # Read from a queue a reset in flight has rewound, the message starts over; from
        # the group's retry topic (an origin: shown at its first place) it counts on.
        in_place = received.message.system.origin_topic is None
        rewound = in_place and received.message.queue in gm.rewound.get(topic, ())
        if body not in gm.exempt and not rewound:
            problems = []
            if acked:
                problems.append(("acked-redelivered", "its ack answered acked"))
            if dead:
                problems.append(("delivered-after-dead-letter", "it is a dead letter"))
            if now < visible_at:
                problems.append(
                    (
                        "redelivered-while-invisible",
                        f"its lease runs to +{visible_at - self.world.start}ms",
                    )
                )
            if received.delivery_attempt <= last:
                problems.append(
                    ("attempt-not-counted", f"the previous delivery was attempt {last}")
                )
            if per_copy and copy not in gm.copy_attempt and body in gm.last_attempt:
                problems.append(("redrive-duplicate", "one copy more than redrives sent back"))
            if problems and gm.allowance[body] > 0:
                gm.allowance[body] -= 1  # a redriven copy
                via_allowance, problems = True, []
            for kind, why in problems:
                if kind == "redelivered-while-invisible" and len(problems) > 1:
                    continue
                self._violate(kind, f"{what}: {why}")
            if topic == "f" and m.fifo_seq is not None:
                self._check_fifo(gm, m, what, earlier)
        d = Delivery(
            body,
            topic,
            received.receipt_handle,
            received.delivery_attempt,
            received.invisible_until,
            step=len(self.log),
            via_allowance=via_allowance,
            copy=copy,
            lease=lease_of(received.receipt_handle) if topic == "f" else None,
        )
        gm.deliveries.append(d)
        gm.latest[body] = d
        gm.visible_at[body] = received.invisible_until
        gm.last_attempt[body] = received.delivery_attempt
        gm.copy_visible_at[copy] = received.invisible_until
        gm.copy_attempt[copy] = received.delivery_attempt

    def _check_fifo(self, gm: GroupModel, m: Msg, what: str, earlier: set[bytes]) -> None:
        def unsettled() -> list[Msg]:
            settled = gm.acked | gm.maybe_acked | gm.dead_ever | gm.excused | earlier
            return [
                other
                for other in self.msgs.values()
                if other.topic == "f"
                and other.group_key == m.group_key
                and other.fifo_seq is not None
                and other.fifo_seq < m.fifo_seq
                and other.required
                and other.body not in settled
                and other.body not in gm.exempt
            ]

        if unsettled():
            self._check_storage()  # it may have become a dead letter in this very request
        for other in unsettled():
            self._violate("fifo-order", f"{what}: {other.body!r} before it is not settled")

    def _acked(self, group: str, d: Delivery) -> None:
        gm = self.groups[group]
        # delivered again since: a later delivery counts one more attempt; a change of
        # invisible time gives a new handle for the same attempt (not a delivery: the
        # handle it replaced may still ack, docs/http-api.md). Once a redrive gave the
        # group another copy, only a delivery or a dead letter of this copy makes it stale.
        per_copy = gm.granted[d.body] > 0
        later = [
            x
            for x in gm.deliveries
            if x.step > d.step
            and x.body == d.body
            and x.attempt > d.attempt
            and (x.copy == d.copy or not per_copy)
        ]
        if d.body not in gm.exempt and any(not x.via_allowance for x in later):
            self._violate(
                "stale-ack-acked",
                f"{group} ack of {d.body!r} attempt {d.attempt} answered acked; "
                f"it was delivered again since (attempt {later[-1].attempt})",
            )
        reset = gm.reset_at.get(d.topic)
        in_place = TOPICS[d.topic][0] == "FIFO" or d.attempt == 1  # else from the retry topic
        dropped = d.handle in gm.reset_dropped or (reset is not None and d.step <= reset)
        # judged until the message is delivered again or acked otherwise: an ack of an
        # offset settled since (acked, or moved on by a later lease) answers acked
        settled = d.body in gm.acked | gm.maybe_acked or any(
            x.body == d.body and x.step > d.step for x in gm.deliveries
        )
        if dropped and in_place and not d.via_allowance and not settled:
            self._violate(
                "reset-handle-acked",
                f"{group} ack of {d.body!r} attempt {d.attempt} answered acked; it was leased "
                f"before the offset reset of {d.topic} answered, which dropped its lease",
            )
        seen = gm.copy_letter_seen.get(d.copy) if per_copy else gm.letter_seen.get(d.body)
        if d.body not in gm.exempt and seen is not None and seen > d.step:
            self._violate(
                "stale-ack-acked",
                f"{group} ack of {d.body!r} attempt {d.attempt} answered acked; "
                "it was dead-lettered since",
            )
        # The ack of a redriven copy, while the group's own copy of the message (leased,
        # or moved to its retry topic) is not acked nor dead-lettered, settles the copy
        # only: the own copy may still be delivered (and its deliveries are checked).
        own_live = d.body not in gm.dead_ever and any(
            x.body == d.body and not x.via_allowance for x in gm.deliveries
        )
        if not (d.via_allowance and own_live):
            gm.acked.add(d.body)
        gm.visible_at.pop(d.body, None)
        gm.acked_copies.add(d.copy)
        gm.copy_visible_at.pop(d.copy, None)

    def _check_storage(self) -> None:
        """After every step: dead-letter queues and committed offsets, as stored."""
        for group, gm in self.groups.items():
            for letter in self.world.new_dead_letters(self.n(group)):
                body = letter.message.body
                m = self.msgs.get(body)
                if m is None:
                    self._violate("unsent-delivered", f"dead letter {body!r} was never sent")
                    continue
                if letter.offset in gm.letter_bodies:
                    continue
                gm.letter_bodies[letter.offset] = body
                gm.letter_copies[letter.offset] = copy_of(letter.message)
                gm.letter_seen[body] = len(self.log)
                gm.copy_letter_seen.setdefault(gm.letter_copies[letter.offset], len(self.log))
                gm.dead_ever.add(body)
                if letter.redriven:
                    self._grant(group, letter.offset)
                else:
                    gm.dead.add(body)
                    gm.dead_copies.add(gm.letter_copies[letter.offset])
                if m.status in ("half", "rolled-back"):
                    self._violate("rolled-back-visible", f"dead letter {body!r} is {m.status}")
                if gm.granted[body]:
                    acked = copy_of(letter.message) in gm.acked_copies
                else:
                    acked = body in gm.acked
                if acked and body not in gm.exempt:
                    self._violate(
                        "acked-redelivered",
                        f"{group}: {body!r} acked, then dead-lettered (DLQ offset {letter.offset})",
                    )
            for body, n in Counter(gm.letter_bodies.values()).items():
                if n > 1 + gm.granted[body] and body not in gm.exempt:
                    self._violate(
                        "dlq-duplicate",
                        f"{group} DLQ holds {body!r} {n} times "
                        f"({gm.granted[body]} redriven copies)",
                    )
            for key, committed in self.world.committed_offsets(self.n(group)).items():
                before = gm.committed.get(key, 0)
                if committed < before:
                    self._violate(
                        "offset-backwards", f"{group} {key} committed {before} -> {committed}"
                    )
                gm.committed[key] = committed

    @invariant()
    def check_every_step(self) -> None:
        INJECTOR.disarm()
        if self.dirty:
            self._check_storage()
            self.dirty = False

    # ================================================================== at rest
    def teardown(self) -> None:
        try:
            if not self.violated:  # else the rest would judge what the step left half-done
                self._quiesce()
        finally:
            INJECTOR.disarm()
            self.world.close()

    def _quiesce(self) -> None:
        """Resend what failed, finish commits, move the clock past every delay and backoff,
        run the scheduler and drain every group; then nothing may be missing."""
        if not self.log:
            return
        self.log.append("-- at rest: resends, commits, clock moved on, drained --")
        # the caches of a container live by the wall clock (30 s for internal topics): at
        # rest they have expired, as new containers' have
        self.world.restart(0)
        self.world.restart(1)
        for _ in range(len(self.pending)):
            self._run(0, None, self._op_resend(0, 0))
        for entry in list(self.pending_steps):
            self._run(0, None, self._step_op(*entry))
        for _, group, d, _ in self.pending_steps:  # still unknown: either effect may be there
            self.groups[group].maybe_acked.add(d.body)
        for txn in list(self.txns.values()):
            for part in sorted(txn.failed_parts):
                if txn.state != "rolled-back":
                    self._run(0, None, self._part_send_op(txn, part))
        for slot, txn in list(self.txns.items()):
            if txn.state == "maybe-committed":
                self._run(0, None, self._op_commit(slot, 0))
        unfinished, self.unfinished_redrives = self.unfinished_redrives, []
        for group, body in unfinished:
            self._run(0, None, self._redrive_op(group, body))
        quiet = 0
        for _ in range(16):
            self.clock.advance(125)
            self._run(0, None, self._op_tick(0, 0))
            self._run(0, None, self._op_checks(0, 0))
            got = 0
            for group, topic in PAIRS:
                for _ in range(8):
                    received: list[ReceivedMessage] = []
                    self._run(0, None, self._receive_op(group, topic, 16, 10, received))
                    if not received:
                        break
                    got += len(received)
                    gm = self.groups[group]
                    # by handle: one response may hold two copies of a message (redriven)
                    by_handle = {d.handle: d for d in gm.deliveries}
                    ds = [
                        by_handle[r.receipt_handle]
                        for r in received
                        if r.receipt_handle in by_handle
                    ]
                    self._run(0, None, self._ack_op(group, ds))
            quiet = 0 if got else quiet + 1
            if quiet >= 2:
                break
        self._moves_at_rest()
        self._check_storage()
        self._check_at_rest()

    def _ack_op(self, group: str, ds: list[Delivery]) -> Op:
        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            for x, result in zip(ds, value, strict=True):
                if result.status.value == "acked":
                    self._acked(group, x)

        return Op(
            f"ack {group} {[d.body.decode() for d in ds]}",
            lambda broker: broker.consume.ack(self.n(group), [d.handle for d in ds]),
            apply,
            in_flight=self._acks_in_flight(group, ds),
        )

    def _check_at_rest(self) -> None:
        broker = self.world.observer
        stored = Counter[bytes]()
        for topic, (_, queues) in TOPICS.items():
            for queue in range(queues):
                offset = 0
                while True:
                    read = broker.log_reader.read(self.n(topic), queue, offset, max_messages=1000)
                    for message in read.messages:
                        stored[message.body] += 1
                    if read.next_offset >= read.max_offset or read.next_offset == offset:
                        break
                    offset = read.next_offset
        for body, n in stored.items():
            m = self.msgs.get(body)
            if m is None:
                self._violate("unsent-delivered", f"{body!r} is stored but was never sent")
            elif n > 1:  # a redrive sends a letter back to its group, not to the topic
                self._violate("stored-twice", f"{body!r} is stored {n} times in {m.topic}")
            elif m.status in ("half", "rolled-back"):
                self._violate("rolled-back-visible", f"{body!r} ({m.status}) is in {m.topic}")
            elif m.status == "cancelled":
                self._violate("cancelled-delivered", f"{body!r} (cancelled) is in {m.topic}")
        for m in self.msgs.values():
            if m.required and stored[m.body] == 0:
                self._violate("lost", f"{m.body!r} ({m.status}) is not stored in {m.topic}")
        for group, gm in self.groups.items():
            in_dlq = {
                b for o, b in gm.letter_bodies.items() if (group, o) not in self.redriven_letters
            }
            done = gm.acked | gm.maybe_acked | in_dlq | gm.excused
            for m in self.msgs.values():
                if m.topic in gm.topics and m.required and m.body not in done:
                    self._violate(
                        "lost",
                        f"{group} never got {m.body!r} ({m.status}, "
                        f"{m.topic}) to ack, nor is it a dead letter",
                    )


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        parts = []
        for v in value:
            if isinstance(v, ReceivedMessage):
                parts.append(f"{v.message.body.decode()}#{v.delivery_attempt}")
            elif hasattr(v, "status"):
                parts.append(str(v.status.value))
            elif isinstance(v, tuple):
                parts.append(str(v[1]))
            else:
                parts.append(type(v).__name__)
        return str(parts)
    if isinstance(value, ReceivedMessage):
        return f"{value.message.body.decode()}#{value.delivery_attempt}"
    if hasattr(value, "shown"):  # an answer that says how it is shown (sqs_fifo_rules.py)
        return str(value.shown)
    for attr in ("redriven", "moved", "changed", "duplicate"):
        if hasattr(value, attr):
            return f"{attr}={getattr(value, attr)}"
    return type(value).__name__
