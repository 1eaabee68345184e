"""Run the template's Schedule events on timers, as EventBridge would, on the broker's clock.

Due times are kept in broker time (:func:`cirrusmq_broker.clock.now_ms`): after
``LocalStack.advance_time`` a job whose firing time was passed runs once (missed firings are
skipped, as when running late), and :meth:`ScheduleRunner.run_due` runs those due jobs and
returns when they are done — or parked on the broker clock: a long-running invocation (the
delay scheduler works through its minute, sleeping with ``clock.sleep_until``) goes on in its
own thread and the next ``advance_time`` wakes it (``clock.settle`` waits for its work).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cirrusmq_broker import clock
from cirrusmq_broker.storage.delays.invoke import WAKE_EVENT

from cirrusmq_local.cron import CronError, CronExpression
from cirrusmq_local.lambda_runtime import FunctionRuntime
from cirrusmq_local.resolver import ACCOUNT_ID, REGION
from cirrusmq_local.template import ScheduleEvent, TemplateError

__all__ = ["Rate", "ScheduleRunner", "ScheduledJob", "broker_now", "parse_schedule"]

log = logging.getLogger(__name__)

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(second|minute|hour|day)s?\s*\)$", re.IGNORECASE)
_CRON = re.compile(r"^cron\((.*)\)$", re.IGNORECASE)
_POLL_SECONDS = 1.0  # a sleeping timer looks at the clock at least this often


def broker_now() -> datetime:
    """The broker clock's time (wall time plus the local stack's offset), in UTC."""
    return datetime.fromtimestamp(clock.now_ms() / 1000, UTC)


@dataclass(frozen=True)
class Rate:
    """``rate(N unit)``: fires every ``interval``, first one ``interval`` after the start."""

    interval: timedelta

    def next_after(self, moment: datetime) -> datetime:
        """The next firing time after ``moment``."""
        return moment + self.interval


def parse_schedule(expression: str) -> Rate | CronExpression:
    """Parse ``rate(5 minutes)``, ``rate(1 hour)``, ``rate(30 seconds)`` (local only) or
    ``cron(0 12 * * ? *)``; raise :class:`TemplateError` with the reason otherwise."""
    rate = _RATE.match(expression.strip())
    if rate:
        amount, unit = int(rate.group(1)), rate.group(2).lower()
        if amount < 1:
            raise TemplateError(f"{expression}: the rate must be at least 1")
        return Rate(timedelta(**{f"{unit}s": amount}))
    cron = _CRON.match(expression.strip())
    if cron:
        try:
            return CronExpression.parse(cron.group(1))
        except CronError as exc:
            raise TemplateError(f"{expression}: {exc}") from None
    raise TemplateError(
        f"unsupported schedule {expression!r}: use rate(N minute|minutes|hour|hours|day|days"
        "|second|seconds) or cron(minutes hours day-of-month month day-of-week year)"
    )


@dataclass
class ScheduledJob:
    """One Schedule event of one function, with its (resolved) ``Input`` text if any."""

    runtime: FunctionRuntime
    event: ScheduleEvent
    input_text: str | None = None

    def __post_init__(self) -> None:
        self.schedule = parse_schedule(self.event.expression)
        if self.input_text is not None:
            try:
                json.loads(self.input_text)
            except ValueError as exc:
                raise TemplateError(
                    f"{self.runtime.logical_id}.{self.event.event_name}: Input is not JSON: {exc}"
                ) from None

    @property
    def rule_name(self) -> str:
        """The EventBridge rule name (the event's ``Name`` or one derived from the function)."""
        return self.event.name or f"{self.runtime.physical_name}-{self.event.event_name}"

    def payload(self, now: datetime | None = None) -> Any:
        """The event EventBridge delivers: the ``Input`` JSON itself when given, otherwise
        a ``Scheduled Event``."""
        if self.input_text is not None:
            return json.loads(self.input_text)
        now = now or broker_now()
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT_ID,
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{self.rule_name}"],
            "detail": {},
        }

    def run(self, event: dict[str, Any] | None = None) -> Any:
        """Invoke the function once, synchronously (with ``event``, else the scheduled
        event); return its result."""
        return self.runtime.invoke(event if event is not None else self.payload())


class ScheduleRunner:
    """One daemon thread per enabled job, timed on the broker clock; runs are overlap-free
    per job (a late run delays the next one; missed firings are skipped, not replayed)."""

    def __init__(self, jobs: list[ScheduledJob]) -> None:
        self.jobs = jobs
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._due: dict[int, datetime | None] = {}
        self._job_locks: dict[int, threading.Lock] = {}
        self._holders: dict[int, int] = {}
        """Job index → the thread running it now."""
        self._wakes: dict[int, int] = {}
        """Job index → how often it was asked to fire out of its schedule."""
        self._woken: set[int] = set()
        """Jobs whose next run is an out-of-schedule one (it gets the wake event)."""

    def start(self, *, at_once: frozenset[tuple[str, str]] = frozenset()) -> None:
        """Start the timers of every enabled job; those named in ``at_once`` (function
        logical id, event name) fire at once instead of one period from now."""
        self._stop.clear()
        now = broker_now()
        for index, job in enumerate(self.jobs):
            if not job.event.enabled:
                continue
            first = (job.runtime.logical_id, job.event.event_name) in at_once
            self._due[index] = now if first else job.schedule.next_after(now)
            self._job_locks[index] = threading.Lock()
            thread = threading.Thread(
                target=self._loop,
                args=(index, job),
                daemon=True,
                name=f"cirrusmq-schedule-{job.runtime.logical_id}-{job.event.event_name}",
            )
            thread.start()
            self._threads.append(thread)

    def due(self, job: ScheduledJob) -> datetime | None:
        """The job's next firing time (broker time), None when it will not fire again."""
        return self._due.get(self.jobs.index(job))

    def fire_soon(self, logical_id: str) -> None:
        """Fire the function's jobs now, out of their schedule (as an asynchronous invoke
        would); a run under way is followed by another one."""
        now = broker_now()
        for index, job in enumerate(self.jobs):
            if job.runtime.logical_id != logical_id or index not in self._due:
                continue
            self._wakes[index] = self._wakes.get(index, 0) + 1
            self._woken.add(index)
            due = self._due.get(index)
            if due is not None and due > now:
                self._due[index] = now
        with self._wake:
            self._wake.notify_all()

    def _loop(self, index: int, job: ScheduledJob) -> None:
        while not self._stop.is_set():
            due = self._due.get(index)
            if due is None:
                return
            delay = (due - broker_now()).total_seconds()
            if delay > 0:
                with self._wake:
                    self._wake.wait(min(delay, _POLL_SECONDS))
                continue
            self._fire_if_due(index, job)

    def _fire_if_due(self, index: int, job: ScheduledJob, *, skip_parked: bool = False) -> bool:
        lock = self._job_locks[index]
        if skip_parked:  # a run parked on the broker clock (the delay scheduler) is running
            while not lock.acquire(timeout=0.01):
                holder = self._holders.get(index)
                if holder is not None and clock.parked(holder):
                    return False
        else:
            lock.acquire()
        try:
            due = self._due.get(index)
            if due is None or due > broker_now() or self._stop.is_set():
                return False
            self._holders[index] = threading.get_ident()
            wakes_before = self._wakes.get(index, 0)
            jumped_before = clock.offset_ms()
            event = dict(WAKE_EVENT) if index in self._woken else None
            self._woken.discard(index)
            try:
                job.run(event)
            except BaseException:  # a dying handler must not end the timer
                log.exception(
                    "scheduled %s.%s failed", job.runtime.logical_id, job.event.event_name
                )
            finally:
                self._holders.pop(index, None)
            now = broker_now()
            due = job.schedule.next_after(due)
            if due is not None:  # time jumped during a long run: its grid moved along
                due += timedelta(milliseconds=clock.offset_ms() - jumped_before)
            if due is not None and due <= now:  # running late or time jumped: skip missed
                due = job.schedule.next_after(now)
            if due is not None and self._wakes.get(index, 0) != wakes_before:
                due = now  # woken during this run: fire again
            self._due[index] = due
            return True
        finally:
            lock.release()

    def run_due(self) -> int:
        """Run every job that is due on the broker clock now (once each); wait for a run
        already under way. Returns how many ran.

        Each run has its own thread; this returns when each has finished or is parked on
        the broker clock (a long-running invocation such as the delay scheduler, which
        then goes on in its thread, woken by the next ``advance_time``)."""
        outcomes: dict[int, bool] = {}

        def fire(index: int) -> None:
            outcomes[index] = self._fire_if_due(index, self.jobs[index], skip_parked=True)

        threads = []
        for index in list(self._due):
            thread = threading.Thread(
                target=fire, args=(index,), daemon=True, name=f"cirrusmq-run-due-{index}"
            )
            thread.start()
            threads.append(thread)
        for thread in threads:
            while thread.is_alive() and not clock.parked(thread.ident or 0):
                time.sleep(0.005)
        with self._wake:
            self._wake.notify_all()  # sleeping timers look at their new due times
        return sum(outcomes.values())

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the timers; wait up to ``timeout`` for a running invocation to finish."""
        self._stop.set()
        clock.interrupt_sleepers()  # a run parked on the broker clock gives up
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s still running after stop; leaving it (daemon)", thread.name)
        self._threads.clear()
