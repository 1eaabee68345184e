"""Receive: the long poll that delivers messages under a lease.

A receive first reads, in one batched call, every queue's head, the group's summary on every
queue and the group's subscription: that tells which queues have unread messages or may
have expired leases for the group, and only those are touched (an idle poll costs that one
read; a queue's lease items are queried only when a deadline may have passed or flow
control may bind). Due messages of the group's retry topic come first (retries/
retry_topic.py), then the topic's queues in turn: each call starts at the next queue and
moves on until ``max_messages`` (or the response byte budget) is reached, so every queue is
served first once every N calls and none starves behind a busy one.

While one queue can fill it, a receive reads only the head and summary of the queue it starts
at, and the others in one more batched call if that queue falls short: a backlog costs ~1.5
read units a receive instead of one per two queues. It reads that way after a receive of the
group on the topic, in this process, that its first queue filled, or that read every queue,
was filled and saw at least half of them holding ``max_messages`` unread (``_note_fill``).
Not on FIFO topics (an orderly pass weighs every queue) nor for groups whose expired leases
are redelivered at once (the queue whose lease expired first goes first); an expired lease
on a queue not read waits until a receive starts there (within N of the group's calls in
this process) or reads past its first queue. A receive that fails part-way (429, 503)
answers with what it leased already, rather than leave it invisible.

Per queue, expired leases go first to the retries' lease expiry (retries/lease_expiry.py):
on a FIFO topic they stay and are redelivered in place, before anything after them of
their message groups (see orderly.py); on other topics their messages move to the retry topic,
unless the group's redelivery is immediate (SQS): then they stay and are redelivered in
place, oldest first, before new messages (the queue whose lease expired first is served
first, on every other call: see ``_expired_first``).
Then the queue's plan (queue_plan.py) is leased, and the queue's summary and the leases
created or changed are written in one transaction (small items: the cost does not grow
with what is in flight). A long poll repeats the batched read about once a second and
returns within its wait. A receive that delivers nothing tells (``due_hint``) when
something of the group it could not serve yet may become receivable (rules/next_due.py).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable

from ... import limits
from ...errors import (
    Busy,
    InvalidDuration,
    InvalidRequest,
    StorageUnavailable,
    SubscriptionConflict,
    Throttled,
)
from ...model import MessageType, ReceivedMessage, StoredMessage, Topic
from ...rules import orderly
from ...rules.filters import TAG, Filter, Subscription, parse_filter
from ...rules.group_order import visible_order
from ...rules.group_state import GroupQueueState, Lease
from ...rules.membership import ClientIdInUse, Membership, check_client_id
from ...rules.next_due import next_due_ms
from ...storage.group_views import GroupView, GroupViewReader
from ...storage.groups import GroupStateStore
from ...validation import check_group_name
from .. import optimistic
from ..receipt_handles import ReceiptHandles
from ..retries import LeaseExpiry, RetryTopic
from ..retries.retry_topic import DueRetries
from ..retries.settings import RetrySettings
from ..topic_catalog import TopicCatalog
from .invisible import check_invisible
from .queue_plan import QueuePlan, QueuePlanner
from .response_size import RESPONSE_BYTE_BUDGET, fitting, wire_size

POLL_INTERVAL_SECONDS = 1.0
"""A long poll re-reads the heads this often: about one read per second while idle."""
POLL_MARGIN_SECONDS = 0.3
"""A long poll stops starting new work this long before its wait ends."""
MIN_PASS_SECONDS = 2.0
"""A pass over the queues may always take this long (a receive without a wait still fills
from several queues); after that, or after the wait, it answers with what it has."""
MAX_OVERRUN_SECONDS = 3.0
"""A pass that found nothing yet may take on more queues this long past its deadline; a
long poll so ends far under the 30 s HTTP API timeout."""
TRACKED_PAIRS = 10_000
"""(group, topic) pairs a process keeps a rotation and a read-in-turn mark for, at most."""


class Receiver:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        states: GroupStateStore,
        views: GroupViewReader,
        planner: QueuePlanner,
        handles: ReceiptHandles,
        expiry: LeaseExpiry,
        retry_topic: RetryTopic,
        settings: RetrySettings,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._topics = topics
        self._states = states
        self._views = views
        self._planner = planner
        self._handles = handles
        self._expiry = expiry
        self._retry_topic = retry_topic
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self._starts: dict[tuple[str, str], itertools.count[int]] = {}
        self._expired_went_first = _Marks()
        self._fills_from_one = _Marks()
        self._lock = threading.Lock()

    def receive(
        self,
        group: str,
        topic_name: str,
        *,
        filter_expression: str = "*",
        filter_type: str = TAG,
        max_messages: int = limits.DEFAULT_RECEIVE_MESSAGES,
        invisible_seconds: int = limits.DEFAULT_INVISIBLE_SECONDS,
        wait_seconds: float = 0,
        client_id: str | None = None,
        access_key: str | None = None,
        before_receive: Callable[[], int] | None = None,
        due_hint: Callable[[int], None] | None = None,
        per_group: bool = False,
    ) -> list[ReceivedMessage]:
        """Deliver up to ``max_messages``, waiting up to ``wait_seconds`` for the first.

        ``before_receive`` runs once, when the request is checked (its parameters, topic,
        client id and subscription) and before anything is leased: acks riding on the
        receive are applied there, so a request refused as bad input acks nothing. It
        returns the response bytes it takes (the acks' results); the messages get the rest
        of the byte budget.

        ``due_hint``: when the receive delivers nothing, it is called with the milliseconds
        until something of the group it could not serve may become receivable (a lease on
        the topic's queues or its retry topic ends, a retry's backoff passes; at least 1 s),
        if such a moment is known (rules/next_due.py). An empty receive reads the retry
        topic once more if this container's view of it was cached (another container's
        append); nothing else is read for it.

        On a FIFO topic the receive is orderly (orderly.py): ``client_id`` names the consumer
        that takes the queues' locks; without it, only unlocked queues are served and no lock
        is taken. A client id registered by another ``access_key`` (None: an admin, who may
        act for any) is ClientIdInUse: nobody takes another key's consumer's queues.

        ``per_group`` (FIFO topics; SQS's FIFO queues): each message group is held on its
        own (one lease per group a receive hands out) and each message has its own
        visibility; a receive hands out whole groups, the one visible longest first, across
        the topic's queues (rules/group_order.py). Without it a receive is RocketMQ's
        orderly one: per queue, the free groups' messages in log order, one delivery."""
        check_group_name(group)
        if client_id is not None:
            check_client_id(client_id)
        tag_filter = parse_filter(filter_expression, filter_type)
        if not 1 <= max_messages <= limits.MAX_RECEIVE_MESSAGES:
            raise InvalidRequest(f"max_messages must be 1-{limits.MAX_RECEIVE_MESSAGES}")
        check_invisible(invisible_seconds, self._settings.min_invisible_seconds, group)
        if not 0 <= wait_seconds <= limits.MAX_WAIT_SECONDS:
            raise InvalidDuration(f"wait_seconds must be 0-{limits.MAX_WAIT_SECONDS}")
        topic = self._topics.active(topic_name)
        reserved_bytes = 0
        give_up = time.monotonic() + wait_seconds
        recorded = False
        fifo = topic.message_type is MessageType.FIFO
        per_group = per_group and fifo
        while True:
            order = self._rotation(group, topic)
            first = order[:1] if self._reads_in_turn(group, topic, fifo=fifo) else order
            view = self._views.read(
                group, topic.name, topic.queues, members=fifo,
                only=first if len(first) < len(order) else None,
            )  # fmt: skip
            _check_client_owner(view.members, client_id, access_key, self._clock())
            if view.subscription is None and recorded:
                view.subscription = tag_filter.subscription
            self._check_subscription(group, topic.name, tag_filter, view.subscription)
            recorded = True  # checked on every pass: a changed subscription stops this poll
            if before_receive is not None:
                # Acks change lease items only, none of the view's items (heads, summaries,
                # subscription): the view read before them stands, and a lease a concurrent
                # write changed fails this pass's conditional save as it would anyway.
                reserved_bytes, before_receive = before_receive(), None
            received: list[ReceivedMessage] = []
            due = self._retry_topic.due(group, topic)  # due retry messages of this topic first
            if due is not None:
                received = self._serve_retries(
                    due, tag_filter, max_messages, invisible_seconds, give_up, reserved_bytes
                )
            received = self._serve_queues(
                view, topic, first, order, received, tag_filter, max_messages,
                invisible_seconds, give_up, client_id, reserved_bytes, per_group=per_group,
            )  # fmt: skip
            remaining = give_up - time.monotonic() - POLL_MARGIN_SECONDS
            if not received and remaining <= 0 and due is None and due_hint is not None:
                # This container's view of the retry topic may predate another container's
                # append (a nack, whose append woke this consumer): an empty answer reads it
                # once, so it serves what is due or names when it is (not a stale hint).
                due = self._retry_topic.due(group, topic, fresh=True)
                if due is not None:
                    received = self._serve_retries(
                        due, tag_filter, max_messages, invisible_seconds, give_up,
                        reserved_bytes,
                    )  # fmt: skip
            if received or remaining <= 0:
                if not received and due_hint is not None:
                    self._hint(view, group, topic, due_hint)
                return received
            self._sleep(min(POLL_INTERVAL_SECONDS, remaining))

    def _serve_queues(
        self,
        view: GroupView,
        topic: Topic,
        first: list[int],
        order: list[int],
        received: list[ReceivedMessage],
        tag_filter: Filter,
        max_messages: int,
        invisible_s: int,
        give_up: float,
        client_id: str | None,
        reserved_bytes: int,
        *,
        per_group: bool,
    ) -> list[ReceivedMessage]:
        """``received`` (the retries' part) and what the topic's queues add: those of
        ``first`` (as read into ``view``), then, if they fall short, the others of ``order``
        (read now, in one batched call)."""
        started = time.monotonic()
        deadline = max(give_up, started + MIN_PASS_SECONDS)
        for queues in (first, order[len(first) :]):
            if len(received) >= max_messages or not queues:
                break  # one response: the retry part counts too
            if queues is not first and received and time.monotonic() > deadline:
                break  # the pass over the others would stop at once: answer with what is leased
            used = reserved_bytes + sum(wire_size(r.message) for r in received)
            try:
                if queues is not first:  # the first queue fell short: read the others
                    view.add(
                        self._views.read(
                            group=view.group, topic=topic.name, queues=topic.queues,
                            only=queues, subscription=False,
                        )
                    )  # fmt: skip
                received = received + self._pass(
                    view, topic, tag_filter, max_messages - len(received), invisible_s,
                    give_up, client_id, bytes_left=RESPONSE_BYTE_BUDGET - used,
                    holding=bool(received), per_group=per_group, order=queues,
                    started=started,
                )  # fmt: skip
            except (StorageUnavailable, Throttled):
                if received:
                    break  # hand out what is leased rather than let it sit invisible
                raise
        self._note_fill(view, topic, max_messages, filled=len(received) >= max_messages)
        return received

    def _serve_retries(
        self,
        due: DueRetries,
        tag_filter: Filter,
        max_messages: int,
        invisible_seconds: int,
        give_up: float,
        reserved_bytes: int,
    ) -> list[ReceivedMessage]:
        """The deliveries of the group's retry topic's due part, as the consumer sees them."""
        retried = self._pass(
            due.view, due.topic, tag_filter, max_messages, invisible_seconds, give_up,
            bytes_left=RESPONSE_BYTE_BUDGET - reserved_bytes,
        )  # fmt: skip
        return self._retry_topic.served(due, retried, max_messages)

    def _hint(
        self, view: GroupView, group: str, topic: Topic, due_hint: Callable[[int], None]
    ) -> None:
        """Tell ``due_hint`` when something of the group may become receivable: a lease
        deadline on the topic's open queues (as this receive last read or changed them), a
        retry becoming visible or its lease ending (as the retry topic last read it)."""
        open_states = [view.states[q] for q in view.states if not view.heads[q].closed]
        deadlines = [state.earliest_deadline for state in open_states]
        # FIFO: a message held for its not-before time (no notification announces it)
        deadlines += [self._planner.held_due_at(state) for state in open_states if state.held]
        retry = self._retry_topic.receivable_at(group, topic.name)
        hint = next_due_ms([*deadlines, retry], self._clock())
        if hint is not None:
            due_hint(hint)

    def _check_subscription(
        self, group: str, topic: str, tag_filter: Filter, subscribed: Subscription | None
    ) -> None:
        """Record the group's filter on its first receive; refuse another filter (of another
        type or expression) later."""
        wanted = tag_filter.subscription
        if subscribed is None:
            if self._states.subscribe(group, topic, wanted, only_if_new=True):
                return
            subscribed = self._states.subscription(group, topic)
        if subscribed is not None and subscribed != wanted:
            raise SubscriptionConflict(
                f"group {group!r} is subscribed to topic {topic!r} with filter "
                f"{subscribed.describe()!r}, not {wanted.describe()!r}; change the "
                "subscription first",
                details={
                    "topic": topic,
                    "subscribed": subscribed.describe(),
                    "requested": wanted.describe(),
                },
            )

    def subscribe(
        self, group: str, topic_name: str, filter_expression: str, filter_type: str = TAG
    ) -> Subscription:
        """Set the group's filter on a topic (from the cursor on); returns it, canonical."""
        check_group_name(group)
        subscription = parse_filter(filter_expression, filter_type).subscription
        topic = self._topics.active(topic_name)
        self._states.subscribe(group, topic.name, subscription, only_if_new=False)
        return subscription

    def _pass(
        self,
        view: GroupView,
        topic: Topic,
        tag_filter: Filter,
        budget: int,
        invisible_s: int,
        give_up: float,
        client_id: str | None = None,
        *,
        bytes_left: int = RESPONSE_BYTE_BUDGET,
        holding: bool = False,
        per_group: bool = False,
        order: list[int] | None = None,
        started: float | None = None,
    ) -> list[ReceivedMessage]:
        """One pass over the queues with work, of ``order`` (default: all, in turn).
        ``holding``: the caller has leased messages for this response already, so the pass
        ends at its deadline whatever it found (they must not sit invisible while the caller
        gives up on the answer). ``per_group`` (FIFO): every queue with work is planned
        first, then whole message groups are picked across them (:meth:`_pass_by_group`).
        ``started``: when the receive's pass began, if an earlier call of it served other
        queues (the time it may take counts from then)."""
        now = self._clock()
        deadline = max(give_up, (started or time.monotonic()) + MIN_PASS_SECONDS)
        if order is None:
            order = self._rotation(view.group, topic)
        queues = [q for q in order if _has_work(view, q, now)]
        fifo = topic.message_type is MessageType.FIFO
        members = view.members or Membership(view.group)
        if fifo:  # orderly: only the queues this client may hold, with nothing in flight
            queues = [
                q
                for q in queues
                if self._planner.fifo_ready(view, topic, q, client_id, now, per_group=per_group)
            ]
        if per_group:
            return self._pass_by_group(
                view, topic, tag_filter, budget, invisible_s, queues, deadline, client_id,
                members, bytes_left=bytes_left, holding=holding,
            )  # fmt: skip
        in_place_below = self._in_place_below(view, topic, queues, now)
        expired_ran: set[int] = set()
        if in_place_below is not None:
            queues, expired_ran = self._expired_first(
                view, topic, queues, now, deadline + MAX_OVERRUN_SECONDS, budget
            )
        else:
            self._note_expired_first(view, topic, went=False)
        received: list[ReceivedMessage] = []
        for q in queues:
            wanted = budget - len(received)
            late = time.monotonic() - deadline
            held = holding or bool(received)
            if wanted <= 0 or bytes_left <= 0 or late > MAX_OVERRUN_SECONDS or (held and late > 0):
                break  # full, or out of time: answer with what there is
            now = self._clock()
            end = view.heads[q].next_offset
            until = deadline if held else deadline + MAX_OVERRUN_SECONDS
            try:
                if q not in expired_ran:
                    expired = self._expiry.expire(view.states[q], topic, now, until, budget=wanted)
                    if expired is None:
                        continue  # contended or unfinished expiry: it waits for the next pass
                    view.states[q] = expired
                plan = self._planner.plan(
                    view.states[q], tag_filter, wanted, now, end, fifo=fifo,
                    in_place_below=in_place_below,
                )  # fmt: skip
                # one message always fits a whole budget: only alone in the response (not
                # beside riding acks' results) may it go over what is left
                alone = not held and bytes_left >= RESPONSE_BYTE_BUDGET
                count, used = fitting(plan.deliverable(), bytes_left, first=alone)
                try:
                    taken, view.states[q] = self._take(
                        view.states[q],
                        plan,
                        count,
                        tag_filter,
                        now,
                        invisible_s * 1000,
                        end,
                        orderly_for=(client_id, members, topic.queues) if fifo else None,
                        in_place_below=in_place_below,
                    )
                except Busy:
                    continue  # other consumers of the group hold this queue: serve the others
            except (StorageUnavailable, Throttled):
                if received:
                    break  # hand out what is leased already rather than let it sit invisible
                raise
            received.extend(taken)
            bytes_left -= used
        return received

    def _pass_by_group(
        self,
        view: GroupView,
        topic: Topic,
        tag_filter: Filter,
        budget: int,
        invisible_s: int,
        queues: list[int],
        deadline: float,
        client_id: str | None,
        members: Membership,
        *,
        bytes_left: int,
        holding: bool,
    ) -> list[ReceivedMessage]:
        """A FIFO pass holding each message group on its own (SQS): plan every queue with
        work (a bounded number of reads: one plan per topic queue), pick whole groups in the
        order they became visible (rules/group_order.py), then lease each queue's pick and
        store it (one write per queue). The answer lists the messages in the order picked."""
        plans: dict[int, QueuePlan] = {}
        for q in queues:
            late = time.monotonic() - deadline
            if late > MAX_OVERRUN_SECONDS or (holding and late > 0):
                break
            now = self._clock()
            until = deadline if holding else deadline + MAX_OVERRUN_SECONDS
            expired = self._expiry.expire(view.states[q], topic, now, until, budget=budget)
            if expired is None:
                continue  # contended or unfinished expiry: this queue waits for the next pass
            view.states[q] = expired
            plans[q] = self._planner.plan(
                expired, tag_filter, budget, now, view.heads[q].next_offset, fifo=True,
                per_group=True,
            )  # fmt: skip
        runs = [run for q, plan in plans.items() for run in plan.runs(q)]
        picked = visible_order(runs, budget)
        alone = not holding and bytes_left >= RESPONSE_BYTE_BUDGET
        count, _ = fitting(picked, bytes_left, first=alone)
        picked = picked[:count]
        position = {(m.queue, m.offset): p for p, m in enumerate(picked)}
        # queues leased in the order of their first pick: their deadlines then follow the
        # order the groups were handed out (a group becomes visible again in that order)
        first = {m.queue: p for p, m in reversed(list(enumerate(picked)))}
        received: list[ReceivedMessage] = []
        for q in sorted(plans, key=lambda q: first.get(q, len(picked))):
            plan = plans[q]
            chosen = {m.offset for m in picked if m.queue == q}
            try:
                taken, view.states[q] = self._take(
                    view.states[q], plan, len(chosen), tag_filter, self._clock(),
                    invisible_s * 1000, view.heads[q].next_offset,
                    orderly_for=(client_id, members, topic.queues), chosen=chosen,
                )  # fmt: skip
            except Busy:
                continue
            except (StorageUnavailable, Throttled):
                if received:
                    break
                raise
            received.extend(taken)
        last = len(position)
        return sorted(
            received,
            key=lambda r: position.get((r.message.queue, r.message.offset), last),
        )

    def _in_place_below(
        self, view: GroupView, topic: Topic, queues: list[int], now: int
    ) -> int | None:
        """For a group whose redelivery is immediate, on a topic that is not FIFO (which
        redelivers in place anyway), when a lease of ``queues`` may have expired: the
        group's max delivery attempts, below which expired leases are redelivered in place.
        Else None (the group's settings are read only then)."""
        if topic.message_type is MessageType.FIFO:
            return None
        if not any(view.states[q].may_have_expired(now) for q in queues):
            return None
        group = view.states[queues[0]].group
        if not self._settings.redelivers_at_once(group):
            return None
        return self._settings.max_delivery_attempts(group)

    def _expired_first(
        self,
        view: GroupView,
        topic: Topic,
        queues: list[int],
        now: int,
        until: float,
        budget: int,
    ) -> tuple[list[int], set[int]]:
        """A group whose redelivery is immediate (SQS): the queue holding the lease that
        expired first goes first, then the others in turn, so a message whose visibility
        timeout passed comes before newer messages of other queues, as SQS hands it out.
        Returns the order and the queues whose expiry ran here (the pass does not run it
        again).

        A queue's bound may be stale-low (an ack deletes its lease, not the bound): the
        candidates' expiry runs in the bounds' order until one holds an expired lease, and
        a stale bound made exact is stored (one write, once: the queue is no candidate
        after). The call after one that did so keeps the rotation (per group and topic, in
        this process): a message released again and again (a visibility timeout of 0, a
        peek) does not take every receive from the other queues."""
        candidates = sorted(
            (q for q in queues if view.states[q].may_have_expired(now)),
            key=lambda q: view.states[q].earliest_deadline or 0,
        )
        went_first = (view.group, topic.name) in self._expired_went_first
        first, ran = None, set()
        if not went_first:
            for q in candidates:
                state = self._expiry.expire(view.states[q], topic, now, until, budget=budget)
                if state is None:
                    continue  # contended or unfinished: the pass tries it again in turn
                view.states[q] = state
                ran.add(q)
                if state.may_have_expired(now):
                    first = q
                    break
                if state.changed():
                    self._states.save(state)  # a lost race leaves it to the winner
        self._note_expired_first(view, topic, went=first is not None)
        if first is None:
            return queues, ran
        return [first, *(q for q in queues if q != first)], ran

    def _note_expired_first(self, view: GroupView, topic: Topic, *, went: bool) -> None:
        """Whether this call of the group on ``topic`` served an expired lease's queue first."""
        self._expired_went_first.mark((view.group, topic.name), went)

    def _reads_in_turn(self, group: str, topic: Topic, *, fifo: bool) -> bool:
        """Whether the receive reads its first queue alone (the others only if it falls
        short), as :meth:`_note_fill` decided after the group's last receive on the topic in
        this process. Never on a FIFO topic (an orderly pass weighs every queue) nor for a
        group whose expired leases are redelivered at once (the queue whose lease expired
        first goes first)."""
        if fifo or topic.queues == 1 or (group, topic.name) not in self._fills_from_one:
            return False
        return not self._settings.redelivers_at_once(group)

    def _note_fill(self, view: GroupView, topic: Topic, wanted: int, *, filled: bool) -> None:
        """Remember whether the group's next receive on the topic reads its first queue
        alone: when this one did and was filled, or read every queue, was filled and saw at
        least half of them still holding ``wanted`` unread messages (then most receives fill
        from the queue they start at; with fewer, most would need a second read)."""
        if len(view.heads) < topic.queues:
            ready = filled
        else:
            backlogs = [view.heads[q].next_offset - view.states[q].cursor for q in view.heads]
            ready = filled and 2 * sum(b >= wanted for b in backlogs) >= topic.queues
        self._fills_from_one.mark((view.group, topic.name), ready)

    def _rotation(self, group: str, topic: Topic) -> list[int]:
        """All queues, starting from a different one each call of the group (no queue starves
        another, whatever other groups receive in between)."""
        with self._lock:
            if len(self._starts) >= TRACKED_PAIRS and (group, topic.name) not in self._starts:
                self._starts.clear()  # a fresh start is as fair: only memory is bounded
            counter = self._starts.setdefault(
                (group, topic.name), itertools.count(random.randrange(topic.queues))
            )
            start = next(counter) % topic.queues
        return [(start + i) % topic.queues for i in range(topic.queues)]

    def _take(
        self,
        state: GroupQueueState,
        plan: QueuePlan,
        share: int,
        tag_filter: Filter,
        now: int,
        invisible_ms: int,
        end: int,
        orderly_for: tuple[str | None, Membership, int] | None = None,
        in_place_below: int | None = None,
        chosen: set[int] | None = None,
    ) -> tuple[list[ReceivedMessage], GroupQueueState]:
        """Lease ``share`` messages of the plan and store the state (re-planning on a race).
        Returns the deliveries and the queue's state as last read or stored (after a lost
        race, with the winner's leases: their deadlines are the receive's ``due_hint``).

        A state that only moved (skipped expired or filtered messages) or whose bounds were
        made exact from its leases is stored too, so that is not redone on the next poll.
        ``orderly_for`` (FIFO topics: client id, the group's members, the topic's queue
        count): the delivery takes or renews the client's lock in the same write.
        ``chosen`` (per-group FIFO): the offsets of the plan to lease (after a lost race,
        ``share`` picked again from the new plan).
        """
        group, queue = state.group, state.queue

        def lease_and_save(attempt: int) -> list[ReceivedMessage] | optimistic.Conflict:
            nonlocal state, plan, now, chosen
            if attempt > 0:  # another consumer won: read again and plan again
                state = self._states.load_one(state.group, state.topic, state.queue)
                if orderly_for is not None:
                    client_id, members, queues = orderly_for
                    now_ms = self._clock()
                    if not orderly.may_serve(state, client_id, members, queues, now_ms).allowed:
                        return []  # another consumer took the queue meanwhile
                plan = self._planner.plan(
                    state, tag_filter, share, self._clock(), end,
                    fifo=orderly_for is not None, in_place_below=in_place_below,
                    per_group=chosen is not None,
                )  # fmt: skip
                if chosen is not None:
                    picked = visible_order(plan.runs(state.queue), share)
                    chosen = {m.offset for m in picked}
            # a lease runs its whole invisible time from when it is stored: the pass's clock
            # reading may be old by now (expiry moves, batch reads, a lost save)
            now = max(now, self._clock())
            if chosen is not None:
                delivered = _apply_by_group(state, plan, chosen, now, invisible_ms)
            else:
                fifo = orderly_for is not None
                delivered = _apply(state, plan, share, now, invisible_ms, fifo=fifo)
            if orderly_for is not None and orderly_for[0] is not None and delivered:
                orderly.take_lock(state, orderly_for[0], now, invisible_ms)
            state.refresh()
            if not delivered and not state.changed():
                return []  # nothing to hand out and nothing to record
            if self._states.save(state, self._redelivery_traces(state, plan)):
                if orderly_for is not None:
                    self._planner.held_wait(
                        state, plan, now, saved=True, per_group=chosen is not None
                    )
                return [self._handles.received(state, m, lease) for m, lease in delivered]
            return optimistic.CONFLICT

        taken = optimistic.update(
            lease_and_save,
            backoff=True,
            exhausted=optimistic.busy(f"group {group!r} is contended on queue {queue}; retry"),
        )
        return taken, state

    def _redelivery_traces(self, state: GroupQueueState, plan: QueuePlan) -> list[dict]:
        """Items recording the lease ids this pass redelivered in place (with what they
        held unsettled): their handles stay stale after the redelivery settles."""
        superseded = {
            lease.lease_id: lease.unsettled()
            for lease, _ in plan.redeliveries
            if lease.lease_id not in state.leases
        }
        return self._expiry.redelivery_traces(state.group, state.topic, state.queue, superseded)


class _Marks:
    """(group, topic) pairs marked in this process, shared by its threads."""

    def __init__(self) -> None:
        self._marked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._marked

    def mark(self, key: tuple[str, str], on: bool) -> None:
        with self._lock:
            if not on:
                self._marked.discard(key)
            elif key not in self._marked:
                if len(self._marked) >= TRACKED_PAIRS:
                    self._marked.clear()  # unmarked pairs read every queue once: bounded memory
                self._marked.add(key)


def _apply(
    state: GroupQueueState,
    plan: QueuePlan,
    share: int,
    now: int,
    invisible_ms: int,
    *,
    fifo: bool = False,
) -> list[tuple[StoredMessage, Lease]]:
    """Lease ``share`` messages of ``plan`` in ``state`` (redeliveries first, then held
    messages whose group is free, then new ones); what each delivered message is leased
    under. ``fifo``: the new lease records its messages' groups."""
    delivered: list[tuple[StoredMessage, Lease]] = []
    for lease_id, offsets in plan.missing.items():
        state.settle(lease_id, offsets)
    state.release(plan.held_gone)
    state.skip_to(plan.skip_to)
    for lease, messages in plan.redeliveries:
        room = share - len(delivered)
        if room <= 0:
            break
        if messages:
            taken = state.redeliver(
                lease.lease_id, min(len(messages), room), now=now, invisible_ms=invisible_ms
            )
            delivered.extend((m, taken) for m in messages[:room])
    room = share - len(delivered)
    unheld = plan.unheld[: max(room, 0)]
    room -= len(unheld)
    wanted = plan.fresh()
    taken_new, untaken = wanted[: max(room, 0)], wanted[max(room, 0) :]
    end = untaken[0].offset if untaken else plan.scan_end
    taken = unheld + taken_new
    if end > state.cursor or unheld:
        lease = state.lease_new(
            max(end, state.cursor),
            delivered=[m.offset for m in taken],
            cursor_base=plan.base_for(end) if end > state.cursor else state.cursor_base,
            now=now,
            invisible_ms=invisible_ms,
            hold=[o for o in plan.hold if o < end],
            groups=orderly.message_groups([m.message_group for m in taken]) if fifo else None,
        )
        if lease is not None:
            delivered.extend((m, lease) for m in taken)
    return delivered


def _apply_by_group(
    state: GroupQueueState, plan: QueuePlan, chosen: set[int], now: int, invisible_ms: int
) -> list[tuple[StoredMessage, Lease]]:
    """Per-group FIFO: lease the ``chosen`` offsets of ``plan`` (each group's a prefix of
    what the plan lists of it): an expired lease's part is redelivered in place, held and
    new messages get one lease per message group. The cursor moves past the last new
    message taken; a new message it passes over that is not taken is held for later."""
    delivered: list[tuple[StoredMessage, Lease]] = []
    for lease_id, offsets in plan.missing.items():
        state.settle(lease_id, offsets)
    state.release(plan.held_gone)
    state.skip_to(plan.skip_to)
    for lease, messages in plan.redeliveries:
        again = [m for m in messages if m.offset in chosen]
        if again:
            taken = state.redeliver(lease.lease_id, len(again), now=now, invisible_ms=invisible_ms)
            delivered.extend((m, taken) for m in again)
    fresh = plan.fresh()
    taken_new = [m for m in fresh if m.offset in chosen]
    left = [m.offset for m in fresh if m.offset not in chosen]
    end = plan.scan_end
    if left:
        end = max(left[0], max((m.offset + 1 for m in taken_new), default=left[0]))
    taken = [m for m in plan.unheld if m.offset in chosen] + taken_new
    if end > state.cursor or taken:
        by_group: dict[str | None, list[int]] = {}
        for m in taken:
            by_group.setdefault(m.message_group, []).append(m.offset)
        if None in by_group:  # a message without a group holds every group: one lease
            deliveries = [(None, [m.offset for m in taken])]
        else:
            deliveries = [(frozenset([g or ""]), offsets) for g, offsets in by_group.items()]
        hold = [o for o in plan.hold if o < end] + [o for o in left if o < end]
        if any(o < end for o in left) or any(m.offset not in chosen for m in plan.unheld):
            plan.waiting = False  # held for the budget, not for a lease: the next poll serves it
        leased = state.lease_groups(
            max(end, state.cursor),
            deliveries=deliveries,
            cursor_base=plan.base_for(end) if end > state.cursor else state.cursor_base,
            now=now,
            invisible_ms=invisible_ms,
            hold=hold,
        )
        delivered.extend((m, leased[m.offset]) for m in taken)
    return delivered


def _has_work(view: GroupView, queue: int, now: int) -> bool:
    """Whether the group has unread messages, expired leases, or (FIFO) messages held for
    their message group on ``queue``."""
    state, head = view.states[queue], view.heads[queue]
    if head.closed:  # the topic is being deleted (or this is a stale read of its old head)
        return False
    return head.next_offset > state.cursor or state.may_have_expired(now) or bool(state.held)


def _check_client_owner(
    members: Membership | None, client_id: str | None, access_key: str | None, now: int
) -> None:
    """ClientIdInUse when ``client_id`` is a live registration of another access key."""
    member = members.members.get(client_id) if members and client_id else None
    if member is not None and member.owned_by_another(access_key, now):
        raise ClientIdInUse(
            f"client id {client_id!r} of group {members.group!r} is registered by another "
            "access key; use another client id"
        )
