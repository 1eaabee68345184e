"""Move tasks: a group's messages moved to other topics by a resumable, fenced task (what
SQS's StartMessageMoveTask does with a dead-letter queue).

A task is a record (storage/move_tasks.py) with its status and counts; one task runs per
source group at a time. Its runner receives a batch from the source group (a lease, like
any consumer) and hands it off (retries/handoff.py): each append to a destination carries,
in its own transaction, the settle of what it moves in the lease and the task's progress,
conditional on the task's version. So whatever dies when, a message is appended once and
leaves the source once: a crash before an append's commit leaves it leased (it comes back
when the lease ends, and a later run moves it), a crash after has settled it. The runner
holds the task until ``runner_until`` (extended by each step); a task whose runner died is
taken over by the next :meth:`MoveTaskService.resume` (a new start for the same source asks
it, and the scheduled :meth:`MoveTaskService.resume_running` every minute: a task runs to its
end without another start, as SQS's do). It ends COMPLETED when a receive finds nothing
left, CANCELLED after a cancel (seen by its next step), FAILED when its source is gone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidRequest, MoveTaskNotFound, MoveTaskRunning, TopicNotFound
from ..model import StoredMessage
from ..storage.move_tasks import (
    CANCELLED,
    CANCELLING,
    COMPLETED,
    FAILED,
    RUNNING,
    TASK_PREFIX,
    MoveTask,
    MoveTaskStore,
)
from ..validation import check_group_name, check_topic_name
from .delivery import ConsumeService
from .retries.handoff import Handoff
from .topic_catalog import TopicCatalog

MOVE_BATCH = 100
"""Messages one step receives (and moves) at most."""
MOVE_INVISIBLE_SECONDS = 60
"""The lease of a step's batch: a runner that dies leaves it leased this long."""
RUN_SECONDS = 20.0
"""How long one call runs a task before it leaves the rest to a later :meth:`resume`."""
HOLD_SECONDS = 60
"""A runner holds its task this long past each step; then another run may take it over."""
MAX_PER_SECOND = 500
MAX_LISTED = 10


@dataclass(frozen=True)
class MoveTaskId:
    group: str
    stream: str

    @property
    def handle(self) -> str:
        return f"{self.group}/{self.stream[len(TASK_PREFIX) :]}"

    @staticmethod
    def parse(handle: str) -> MoveTaskId | None:
        group, slash, rest = handle.partition("/")
        if not slash or not group or not rest:
            return None
        return MoveTaskId(group, TASK_PREFIX + rest)


class MoveTaskService:
    def __init__(
        self,
        *,
        store: MoveTaskStore,
        consume: ConsumeService,
        handoff: Handoff,
        topics: TopicCatalog,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._consume = consume
        self._handoff = handoff
        self._topics = topics
        self._clock = clock
        self._sleep = sleep

    # ---------------------------------------------------------------- start, list, cancel
    def start(
        self,
        group: str,
        topic: str,
        *,
        destination: str | None = None,
        route_property: str | None = None,
        routes: dict[str, str] | None = None,
        max_per_second: int | None = None,
        to_move: int = 0,
    ) -> MoveTask:
        """Store a running task moving ``group``'s messages of ``topic`` to ``destination``,
        or each to ``routes[its route_property]`` (``routes[""]`` without the property);
        MoveTaskRunning if the group has a running task whose runner is alive; one whose
        runner died is taken over and returned instead (with its own destination and rate).
        The caller then runs the task it gets (:meth:`run`)."""
        check_group_name(group)
        check_topic_name(topic)
        if max_per_second is not None and not 1 <= max_per_second <= MAX_PER_SECOND:
            raise InvalidRequest(f"max_per_second must be 1-{MAX_PER_SECOND}")
        if topic == destination or topic in (routes or {}).values():
            # each step would receive what the last one appended: the task never ends
            raise InvalidRequest("a move task's destination must be another topic")
        self._topics.active(topic)
        for name in [destination, *(routes or {}).values()]:
            if name is not None:
                self._topics.active(name)
        now = self._clock()
        task = MoveTask(
            group=group,
            stream=f"{TASK_PREFIX}{now:015d}.{uuid.uuid4().hex[:12]}",
            source_topic=topic,
            started=now,
            destination_topic=destination,
            route_property=route_property,
            routes=dict(routes or {}),
            max_per_second=max_per_second,
            to_move=to_move,
            runner_until=now + HOLD_SECONDS * 1000,
        )
        if self._store.create(task):
            return task
        taken = self.resume(group)
        if taken is None:
            raise MoveTaskRunning(f"group {group!r} already has a running move task")
        return taken

    def resume(self, group: str) -> MoveTask | None:
        """Take over ``group``'s running task if its runner died (its hold passed)."""
        running = self._store.running(group)
        if running is None:
            return None
        now = self._clock()
        return self._store.take_over(running, now, now + HOLD_SECONDS * 1000)

    def resume_running(self, time_left: Callable[[], float] | None = None) -> list[MoveTask]:
        """Take over and run every running task whose runner's hold passed (the scheduled
        function's step), each for up to ``RUN_SECONDS`` while ``time_left`` allows; the
        tasks run, as left. No running task: one read."""
        done: list[MoveTask] = []
        for group in self._store.running_groups():
            seconds = RUN_SECONDS if time_left is None else min(RUN_SECONDS, time_left())
            if seconds <= 0:
                break
            task = self.resume(group)
            if task is not None:
                done.append(self.run(task, seconds=seconds))
        return done

    def recent(self, group: str, limit: int = 1) -> list[MoveTask]:
        check_group_name(group)
        if not 1 <= limit <= MAX_LISTED:
            raise InvalidRequest(f"limit must be 1-{MAX_LISTED}")
        return self._store.recent(group, limit)

    def cancel(self, task: MoveTaskId) -> MoveTask:
        """Ask a running task to stop; its runner's next step ends it CANCELLED (at once
        if no runner holds it). MoveTaskNotFound if it is not running."""
        cancelled = self._store.cancel(task.group, task.stream)
        if cancelled is None:
            raise MoveTaskNotFound("no such running move task")
        if cancelled.runner_until < self._clock():
            self._store.finish(cancelled, CANCELLED, self._clock() // 1000)
        return cancelled

    def get(self, task: MoveTaskId) -> MoveTask | None:
        return self._store.get(task.group, task.stream)

    # ---------------------------------------------------------------- running
    def run(self, task: MoveTask, *, seconds: float = RUN_SECONDS) -> MoveTask:
        """Move the task's messages, step by step, for up to ``seconds``; the task as left
        (still RUNNING if time ran out: a later :meth:`resume` goes on). A task taken over
        first moves what of its last step's batch is still leased."""
        until = time.monotonic() + seconds
        if task.held and task.status == RUNNING:
            task = self._move(task)
        while True:
            fresh = self._store.get(task.group, task.stream)
            if fresh is None or fresh.status not in (RUNNING, CANCELLING):
                return fresh or task
            if fresh.runner_until != task.runner_until:
                return fresh  # another run took it over
            if fresh.status == CANCELLING:
                self._store.finish(fresh, CANCELLED, self._clock() // 1000)
                return self._store.get(task.group, task.stream) or fresh
            if time.monotonic() > until:
                return fresh
            task = self._step(fresh)

    def _step(self, task: MoveTask) -> MoveTask:
        """Receive a batch, record it in the task, move it; the task as it is after."""
        started = time.monotonic()
        batch = min(MOVE_BATCH, task.max_per_second or MOVE_BATCH)
        try:
            received = self._consume.receive(
                task.group, task.source_topic, max_messages=batch,
                invisible_seconds=MOVE_INVISIBLE_SECONDS,
            )  # fmt: skip
        except TopicNotFound:
            self._store.finish(task, FAILED, self._clock() // 1000, "the source queue is gone")
            return task
        if not received:
            self._store.finish(task, COMPLETED, self._clock() // 1000)
            return task
        hold = self._clock() + HOLD_SECONDS * 1000
        begun = self._store.begin_step(task, [r.receipt_handle for r in received], hold)
        if begun is None:
            return task  # cancelled or taken over: read again (the batch's lease ends)
        after = self._move(begun)
        if task.max_per_second:
            pause = (after.moved - task.moved) / task.max_per_second
            self._sleep(max(0.0, pause - (time.monotonic() - started)))
        return after

    def _move(self, task: MoveTask) -> MoveTask:
        """Move what of ``task.held`` is still leased; the task after its progress."""
        current = [task]
        hold = task.runner_until  # every append of a step keeps the hold the step took

        def fence(n: int) -> list[dict]:
            return [self._store.progress_request(current[0], n, hold)]

        def committed(n: int) -> None:
            current[0] = self._store.after_progress(current[0], n, hold)

        self._handoff.move(
            task.group,
            list(task.held),
            lambda m: self._route(task, m),
            producer=f"~movetask.{task.group}.{task.stream[len(TASK_PREFIX) :]}",
            drop_property=task.route_property,
            fence=fence,
            committed=committed,
        )
        return current[0]

    @staticmethod
    def _route(task: MoveTask, message: StoredMessage) -> str | None:
        if task.destination_topic is not None:
            return task.destination_topic
        value = ""
        if message.system.dead_letter_reason is not None:
            # only the broker's dead-letter move writes the route: a publisher's own
            # property of that name must not pick a destination its key may not send to
            value = message.properties.get(task.route_property or "", "")
        return task.routes.get(value) or (task.routes.get("") if not value else None)
