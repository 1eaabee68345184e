"""SQS dead letters and move tasks in the model-based test (rules of machine.py's machine).

Group ``g3`` reads topic ``s`` with one delivery attempt and its dead letters going to the
user topic ``d`` (``retries.set_dead_letter_destination``, as an SQS queue's RedrivePolicy
does); group ``gd`` reads ``d`` (a consumer of the dead-letter queue) and a move task of
``gd`` moves what is in ``d`` to topic ``b`` (StartMessageMoveTask with a DestinationArn).
The rules send to ``s``, receive and ack through ``g3`` and ``gd``, start, run, resume and
cancel move tasks, and race them at their guarded writes (``race_at_move``): an ack inside
the expiry move into ``d``, an ack or a cancel inside a task's append, a second runner
taking a task over inside its run, a second start of the group's task or a resume (its
runner's hold still live) inside its run.

The model here is the messages' path alone: an ack answered ``acked`` by ``g3`` means the
message never reaches ``d``; one answered ``acked`` by ``gd`` means it never reaches ``b``;
at rest (every lease expired, every task run to its end and a last one run) each message
whose send answered is acked by ``g3``, or in ``d`` once and then acked by ``gd`` or in
``b`` once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from cirrusmq_broker.errors import MoveTaskNotFound, MoveTaskRunning
from cirrusmq_broker.model import MessageInput, ReceivedMessage
from cirrusmq_broker.rules.receipts import ReceiptSigner
from cirrusmq_broker.services.move_tasks import MoveTaskId
from cirrusmq_broker.storage.move_tasks import CANCELLING, RUNNING
from faults import KINDS, Fault
from hypothesis import strategies as st
from hypothesis.stateful import rule

SOURCE, DEAD, BACK = "s", "d", "b"
SOURCE_GROUP, DEAD_GROUP = "g3", "gd"
MOVE_RACES = (
    ("expire", "ack_source"),  # an ack inside the expiry move into the destination
    ("run", "ack_held"),  # a delete of a message the task is about to append
    ("run", "cancel"),  # a cancel inside the task's append
    ("run", "take_over"),  # another runner, the hold passed, inside the run
    ("run", "start"),  # a second start of the group's task inside the run
    ("run", "resume"),  # a resume inside the run, its runner's hold still live
)
"""(paused request, the request run while it is paused before its TransactWriteItems)."""

_faults = st.one_of(st.none(), st.builds(Fault, at=st.integers(0, 14), kind=st.sampled_from(KINDS)))
_picks = st.integers(0, 63)
_containers = st.integers(0, 1)


@dataclass(frozen=True)
class TaskShown:
    """How a move task request's answer shows in the history (``moved=...``)."""

    moved: str


def _shown(tasks: Any) -> TaskShown:
    """The tasks (one, a list, or None: a live runner holds it) as the history shows them."""
    if tasks is None:
        return TaskShown("none: a live runner holds the task")
    listed = tasks if isinstance(tasks, list) else [tasks]
    return TaskShown(", ".join(f"{t.moved} ({t.status})" for t in listed) or "no task")


class MoveRules:
    """Mixed into the machine: ``_run``, ``_interleave``, ``_violate``, ``world``,
    ``clock`` and ``log`` are the machine's."""

    def _moves_setup(self, broker: Any) -> None:
        """The model's state; the topics and settings come with the first rule that needs
        them (``_mv_ready``): a history without these rules costs nothing more."""
        self.mv_ready = False
        self.mv_sent: dict[bytes, bool] = {}
        """Body → whether its send answered (required at rest)."""
        self.mv_acked: dict[str, set[bytes]] = {SOURCE_GROUP: set(), DEAD_GROUP: set()}
        self.mv_maybe_acked: dict[str, set[bytes]] = {SOURCE_GROUP: set(), DEAD_GROUP: set()}
        self.mv_handles: list[tuple[str, bytes, str, int]] = []
        """(group, body, handle, its lease's deadline) of the deliveries not acked yet."""
        self.mv_tasks: list[MoveTaskId] = []
        self.mv_cancelled: dict[MoveTaskId, int] = {}
        """Task → its moved count when a cancel of it answered: it moves nothing after."""

    def _mv_ready(self, b: int) -> None:
        """Topics s, d, b, g3's one attempt and dead-letter destination, the subscriptions
        (once per history, on container ``b``, without faults)."""
        if self.mv_ready:
            return
        self.mv_ready = True
        broker = self.world.brokers[b]
        for name in (SOURCE, DEAD, BACK):
            broker.admin.create_topic(self.n(name), queues=2)
        broker.retries.set_max_delivery_attempts(self.n(SOURCE_GROUP), 1)
        broker.retries.set_dead_letter_destination(
            self.n(SOURCE_GROUP), self.n(DEAD), {"from": SOURCE}
        )
        for group, topic in ((SOURCE_GROUP, SOURCE), (DEAD_GROUP, DEAD)):
            broker.consume.receive(self.n(group), self.n(topic), max_messages=1)
        self.log.append(f"[{b}] topics s, d, b; g3: one attempt, dead letters to d")

    def _mv_op(self, what: str, call: Any, apply: Any = None) -> Any:
        from machine import Op  # the machine's module imports this one

        return Op(what, call, apply or (lambda outcome, value: None), moves_groups=False)

    # ------------------------------------------------------------------ the requests
    def _mv_send(self, q: int) -> Any:
        bodies = []
        for _ in range(1 + q % 3):
            self.counter += 1
            bodies.append(f"s{self.counter}".encode())
        for body in bodies:
            self.mv_sent[body] = False
        inputs = [MessageInput(body, message_id=f"id-{body.decode()}") for body in bodies]

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                for body in bodies:
                    self.mv_sent[body] = True

        return self._mv_op(
            f"send {SOURCE} {[b.decode() for b in bodies]}",
            lambda broker: broker.produce.send(self.n(SOURCE), inputs),
            apply,
        )

    def _mv_receive(self, group: str, most: int) -> Any:
        topic = SOURCE if group == SOURCE_GROUP else DEAD

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            for received in value:
                self._mv_delivered(group, received)

        return self._mv_op(
            f"receive {group} {topic} max {most} invisible 10s",
            lambda broker: broker.consume.receive(
                self.n(group), self.n(topic), max_messages=most, invisible_seconds=10
            ),
            apply,
        )

    def _mv_delivered(self, group: str, received: ReceivedMessage) -> None:
        body = received.message.body
        what = f"{group} got {body!r} attempt {received.delivery_attempt}"
        if body not in self.mv_sent:
            self._violate("unsent-delivered", f"{what}: never sent to {SOURCE}")
        if body in self.mv_acked[group]:
            self._violate("acked-redelivered", f"{what}: its ack answered acked")
        if group == DEAD_GROUP and body in self.mv_acked[SOURCE_GROUP]:
            self._violate("acked-redelivered", f"{what}: g3's ack answered acked")
        self.mv_handles.append((group, body, received.receipt_handle, received.invisible_until))

    def _mv_ack(self, group: str, handles: list[tuple[str, bytes, str, int]]) -> Any:
        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                self.mv_maybe_acked[group].update(body for _, body, _, _ in handles)
                return
            for (_, body, handle, _), result in zip(handles, value, strict=True):
                if result.status.value == "acked":
                    self.mv_acked[group].add(body)
                entry = (group, body, handle)
                self.mv_handles = [h for h in self.mv_handles if h[:3] != entry]

        return self._mv_op(
            f"ack {group} {[body.decode() for _, body, _, _ in handles]}",
            lambda broker: broker.consume.ack(self.n(group), [h for _, _, h, _ in handles]),
            apply,
        )

    def _mv_ack_held(self) -> Any:
        """An ack (SQS: a DeleteMessage) of a message the running task's step holds, by
        that step's handle: a delete landing while the task moves it."""

        def call(broker: Any) -> Any:
            recent = broker.move_tasks.recent(self.n(DEAD_GROUP))
            held = list(recent[0].held[:1]) if recent and recent[0].held else []
            return broker.consume.ack(self.n(DEAD_GROUP), held) if held else []

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            for result in value:
                if result.status.value == "acked":
                    body = self._mv_body_of(result.receipt_handle)
                    if body is not None:
                        self.mv_acked[DEAD_GROUP].add(body)

        return self._mv_op("ack gd (a handle the task's step holds)", call, apply)

    def _mv_body_of(self, handle: str) -> bytes | None:
        """The body a handle of ``d`` names (read by the observer)."""
        decoded = ReceiptSigner(self.world.settings.receipt_secret).decode(handle)
        read = self.world.observer.log_reader.read(
            decoded.topic, decoded.queue, decoded.offset, max_messages=1
        )
        return read.messages[0].body if read.messages else None

    def _mv_start(self, broker: Any) -> Any:
        """A new task of ``gd`` (d -> b), or the one a dead runner left; None if a live
        runner holds one."""
        try:
            task = broker.move_tasks.start(
                self.n(DEAD_GROUP), self.n(DEAD), destination=self.n(BACK)
            )
        except MoveTaskRunning:
            return None
        if MoveTaskId(task.group, task.stream) not in self.mv_tasks:
            self.mv_tasks.append(MoveTaskId(task.group, task.stream))
        return task

    def _mv_start_run(self) -> Any:
        def call(broker: Any) -> Any:
            task = self._mv_start(broker)
            return _shown(None if task is None else broker.move_tasks.run(task))

        return self._mv_op("move task d -> b: start, run", call)

    def _mv_run(self, task: Any) -> Any:
        return self._mv_op(
            "move task d -> b: run", lambda broker: _shown(broker.move_tasks.run(task))
        )

    def _mv_resume(self) -> Any:
        return self._mv_op(
            "move tasks: resume running",
            lambda broker: _shown(broker.move_tasks.resume_running()),
        )

    def _mv_take_over(self) -> Any:
        """Another runner once the hold passed: the clock 61 s on, then the resume."""

        def call(broker: Any) -> Any:
            self.clock.advance(61)
            return _shown(broker.move_tasks.resume_running())

        return self._mv_op("clock +61s, move tasks: resume running", call)

    def _mv_cancel(self) -> Any:
        def call(broker: Any) -> Any:
            if not self.mv_tasks:
                return None
            task = self.mv_tasks[-1]
            try:
                cancelled = broker.move_tasks.cancel(task)
            except MoveTaskNotFound:
                return TaskShown("not running")
            answered[task] = cancelled.moved
            return _shown(cancelled)

        answered: dict[MoveTaskId, int] = {}

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                for task, moved in answered.items():
                    self.mv_cancelled.setdefault(task, moved)

        return self._mv_op("move task: cancel the latest", call, apply)

    # ------------------------------------------------------------------ the rules
    @rule(b=_containers, q=_picks, fault=_faults)
    def mv_send(self, b: int, q: int, fault: Fault | None) -> None:
        self._mv_ready(b)
        self._run(b, fault, self._mv_send(q))

    @rule(b=_containers, p=_picks, q=_picks, fault=_faults)
    def mv_receive(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        group = (SOURCE_GROUP, DEAD_GROUP)[p % 2]
        self._mv_ready(b)
        self._run(b, fault, self._mv_receive(group, 1 + q % 4))

    @rule(b=_containers, p=_picks, fault=_faults)
    def mv_ack(self, b: int, p: int, fault: Fault | None) -> None:
        if self.mv_handles:
            group, body, handle, deadline = self.mv_handles[p % len(self.mv_handles)]
            self._run(b, fault, self._mv_ack(group, [(group, body, handle, deadline)]))

    @rule(b=_containers, fault=_faults)
    def mv_move(self, b: int, fault: Fault | None) -> None:
        if self.mv_ready:
            self._run(b, fault, self._mv_start_run())

    @rule(b=_containers, fault=_faults)
    def mv_resume(self, b: int, fault: Fault | None) -> None:
        if self.mv_ready:
            self._run(b, fault, self._mv_resume())

    @rule(b=_containers, fault=_faults)
    def mv_cancel(self, b: int, fault: Fault | None) -> None:
        if self.mv_tasks:
            self._run(b, fault, self._mv_cancel())

    @rule(
        b=_containers,
        pair=st.sampled_from(MOVE_RACES),
        p=_picks,
        nth=st.sampled_from((0, 0, 1)),
    )
    def race_at_move(self, b: int, pair: tuple[str, str], p: int, nth: int) -> None:
        """The first request pauses right before its ``nth`` TransactWriteItems (an
        expiry move's append into ``d``, a task's append into ``b`` or its finish), the
        second runs on the other container, then the first goes on."""
        self._mv_ready(b)
        if pair[0] == "expire":
            first, second = self._mv_expiry_race(b, p)
        else:
            self._mv_something_to_move(b)
            task = self._mv_start(self.world.brokers[b])
            self.log.append(f"[{b}] move task d -> b: start -> {'ok' if task else 'running'}")
            if task is None:
                return
            first = self._mv_run(task)
            second = {
                "ack_held": self._mv_ack_held,
                "cancel": self._mv_cancel,
                "take_over": self._mv_take_over,
                "start": self._mv_start_run,
                "resume": self._mv_resume,
            }[pair[1]]()
        self._interleave(b, first, 0, second, before=("TransactWriteItems", nth))

    def _mv_expiry_race(self, b: int, p: int) -> tuple[Any, Any]:
        """A g3 lease past its deadline (one made if there is none), the receive whose
        expiry move appends it to ``d``, and an ack of it."""
        live = [h for h in self.mv_handles if h[0] == SOURCE_GROUP]
        if not live:
            self._run(b, None, self._mv_send(0))
            self._run(b, None, self._mv_receive(SOURCE_GROUP, 1))
            live = [h for h in self.mv_handles if h[0] == SOURCE_GROUP]
            if not live:
                return None, None
        handle = live[p % len(live)]
        if self.clock() <= handle[3]:
            seconds = (handle[3] - self.clock()) / 1000 + 1
            self.clock.advance(seconds)
            self.log.append(f"clock +{seconds:g}s (past the lease of {handle[1].decode()})")
        return self._mv_receive(SOURCE_GROUP, 4), self._mv_ack(SOURCE_GROUP, [handle])

    def _mv_something_to_move(self, b: int) -> None:
        """Dead letters in ``d`` for the task to move: sent to ``s``, received by g3 and
        left to expire."""
        self._run(b, None, self._mv_send(1))
        self._run(b, None, self._mv_receive(SOURCE_GROUP, 4))
        self.clock.advance(11)
        self.log.append("clock +11s (past the leases of g3)")
        self._run(b, None, self._mv_receive(SOURCE_GROUP, 4))  # into d

    # ------------------------------------------------------------------ at rest
    def _moves_at_rest(self) -> None:
        """Every lease expired, every task run to its end, a last task run; then each
        message's path is judged (nothing to do if no rule of these ran)."""
        if not self.mv_ready:
            return
        # g3's leases into d, gd's own ones back, all moved to b: a round receives 16 of
        # g3's messages, and the last ones need 2 rounds more to lapse into d and move on
        for _ in range(4 + -(-len(self.mv_sent) // 16)):
            self.clock.advance(61)
            self._run(0, None, self._mv_resume())
            self._run(0, None, self._mv_receive(SOURCE_GROUP, 16))
            self._run(0, None, self._mv_start_run())
        for task in self.mv_tasks:
            left = self.world.observer.move_tasks.get(task)
            if left is not None and left.status in (RUNNING, CANCELLING):
                self._violate("lost", f"move task {task.handle} is still {left.status}")
            moved = self.mv_cancelled.get(task)
            if left is not None and moved is not None and left.moved > moved:
                self._violate(
                    "moved-after-cancel",
                    f"move task {task.handle}: moved {moved} when its cancel answered, "
                    f"{left.moved} at rest",
                )
        stored = {name: self._mv_stored(name) for name in (SOURCE, DEAD, BACK)}
        for name, counts in stored.items():
            for body, n in counts.items():
                if body not in self.mv_sent:
                    self._violate("unsent-delivered", f"{body!r} is in {name}, never sent")
                elif n > 1:
                    self._violate("stored-twice", f"{body!r} is stored {n} times in {name}")
        for body in stored[DEAD]:
            if body in self.mv_acked[SOURCE_GROUP]:
                self._violate("acked-redelivered", f"g3 acked {body!r}; it is in {DEAD}")
        for body in stored[BACK]:
            if body in self.mv_acked[DEAD_GROUP]:
                self._violate("acked-redelivered", f"gd acked {body!r}; it is in {BACK}")
            if not stored[DEAD][body]:
                self._violate("unsent-delivered", f"{body!r} is in {BACK}, never in {DEAD}")
        for body, required in self.mv_sent.items():
            if not required:
                continue
            settled = self.mv_acked[SOURCE_GROUP] | self.mv_maybe_acked[SOURCE_GROUP]
            if body in settled:
                continue
            if not stored[DEAD][body]:
                self._violate("lost", f"{body!r}: not acked by g3, not in {DEAD}")
                continue
            done = self.mv_acked[DEAD_GROUP] | self.mv_maybe_acked[DEAD_GROUP]
            if body not in done and not stored[BACK][body]:
                self._violate("lost", f"{body!r}: in {DEAD}, not acked by gd, not in {BACK}")

    def _mv_stored(self, name: str) -> Counter[bytes]:
        reader = self.world.observer.log_reader
        stored = Counter[bytes]()
        for queue in range(2):
            offset = 0
            while True:
                read = reader.read(self.n(name), queue, offset, max_messages=1000)
                stored.update(message.body for message in read.messages)
                if read.next_offset >= read.max_offset or read.next_offset == offset:
                    break
                offset = read.next_offset
        return stored
