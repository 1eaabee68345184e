"""The soak's record of one protocol (what was sent, delivered, acked, dead-lettered) and the
judgement of it: lost, duplicate acks, early and rolled-back visible must all be 0.

A delivery is named by its attempt number (the SDK's ``delivery_attempt``, SQS's
``ApproximateReceiveCount``, mq-http's ``ConsumedTimes``): a message whose ack surely took
effect is never delivered again, so a delivery of a higher attempt, a second sure ack or a
dead letter after one is a duplicate ack, whatever the order the threads recorded them in.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sent:
    """A send that answered."""

    topic: str
    """The topic key (which groups consume it)."""
    due_ms: int = 0
    """A lower bound of its delivery time (broker ms), 0 when not delayed."""


@dataclass(frozen=True)
class Delivery:
    """One message handed to a consumer."""

    group: str
    message_id: str
    body: str
    attempt: int
    delivered_at: int
    """The broker time of the delivery: the lease's start when the answer says it, else the
    broker clock read after the answer (an upper bound)."""
    visible_at: int | None = None
    """When the message became visible (its stored time), when the protocol says it."""


@dataclass
class Verdict:
    """The judgement of one or more ledgers."""

    sent: int = 0
    acked: int = 0
    dead: int = 0
    lost: int = 0
    duplicate: int = 0
    early: int = 0
    rolled_back_visible: int = 0
    unsent: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicate or self.early or self.rolled_back_visible or self.unsent
        )

    def add(self, other: Verdict) -> Verdict:
        total = Verdict()
        for name in ("sent", "acked", "dead", "lost", "duplicate", "early"):
            setattr(total, name, getattr(self, name) + getattr(other, name))
        total.rolled_back_visible = self.rolled_back_visible + other.rolled_back_visible
        total.unsent = self.unsent + other.unsent
        total.examples = {**self.examples, **other.examples}
        return total

    def line(self) -> str:
        return (
            f"sent {self.sent}, acked {self.acked}, dead-lettered {self.dead}, lost {self.lost}, "
            f"duplicate acks {self.duplicate}, early {self.early}, "
            f"rolled-back visible {self.rolled_back_visible}"
        )


class Ledger:
    """Everything the soak saw of one protocol, shared by its threads (thread-safe).

    ``groups`` maps each consumer group to the topic keys it consumes: every sent message of
    those topics must end acked (or deleted) or dead-lettered in each of them.
    """

    def __init__(self, protocol: str, groups: dict[str, frozenset[str]]) -> None:
        self.protocol = protocol
        self.groups = groups
        self.lock = threading.Lock()
        self.sent: dict[str, Sent] = {}
        self.uncertain: set[str] = set()
        """Bodies of sends whose outcome is unknown (an error): they may or may not come."""
        self.rolled_back: set[str] = set()
        """Message ids and bodies of every message whose transaction was rolled back."""
        self.deliveries: list[Delivery] = []
        self.sure_acks: dict[tuple[str, str], set[int]] = {}
        """(group, message id) → the attempts whose ack surely took effect."""
        self.deletes: dict[tuple[str, str], set[int]] = {}
        """(group, message id) → attempts deleted without knowing whether it took effect (an
        SQS delete after the visibility timeout: SQS answers success either way)."""
        self.dead: dict[tuple[str, str], str] = {}
        """(group, message id) → body of every dead letter."""
        self.dedup_broken: list[str] = []
        """A deduplicated resend answered with another message id than the first send."""
        self.counters: Counter[str] = Counter()
        self.last_delivery_ms = 0
        """The broker time of the latest delivery."""
        self._expected = 0
        self._settled = 0

    # ------------------------------------------------------------------ recording
    def record_sent(self, message_id: str, topic: str, due_ms: int = 0) -> None:
        with self.lock:
            self.sent[message_id] = Sent(topic, due_ms)
            self._expected += sum(topic in topics for topics in self.groups.values())

    def backlog(self) -> int:
        """About how many (group, message) pairs sent are not settled yet (for pacing)."""
        return self._expected - self._settled

    def record_uncertain(self, *bodies: str) -> None:
        with self.lock:
            self.uncertain.update(bodies)

    def record_rolled_back(self, message_id: str, body: str) -> None:
        with self.lock:
            self.rolled_back.update((message_id, body))

    def record_delivery(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)
            self.last_delivery_ms = max(self.last_delivery_ms, delivery.delivered_at)

    def record_ack(self, group: str, message_id: str, attempt: int, *, sure: bool = True) -> None:
        with self.lock:
            target = self.sure_acks if sure else self.deletes
            target.setdefault((group, message_id), set()).add(attempt)
            self._settled += 1

    def record_dead(self, group: str, message_id: str, body: str) -> None:
        with self.lock:
            self._settled += (group, message_id) not in self.dead
            self.dead[(group, message_id)] = body

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counters[what] += n

    # ------------------------------------------------------------------ judging
    def judge(self) -> Verdict:
        with self.lock:
            return self._judge()

    def _judge(self) -> Verdict:
        verdict = Verdict()
        examples: dict[str, list[str]] = {}

        def example(kind: str, text: str) -> None:
            examples.setdefault(f"{self.protocol} {kind}", []).append(text)

        last_attempt: dict[tuple[str, str], int] = {}
        for d in self.deliveries:
            key = (d.group, d.message_id)
            last_attempt[key] = max(last_attempt.get(key, 0), d.attempt)
        sent = {m: s for m, s in self.sent.items() if m not in self.rolled_back}
        verdict.sent = len(sent)
        for group, topics in self.groups.items():
            for message_id, one in sent.items():
                if one.topic not in topics:
                    continue
                key = (group, message_id)
                sure = self.sure_acks.get(key, set())
                last = last_attempt.get(key, 0)
                deleted_last = last in self.deletes.get(key, set())
                dead = key in self.dead
                if sure or deleted_last:
                    verdict.acked += 1
                if dead:
                    verdict.dead += 1
                if len(sure) > 1:
                    example("acked on two deliveries", f"{group} {message_id} {sorted(sure)}")
                elif sure and last > min(sure):
                    example(
                        "delivered after a sure ack", f"{group} {message_id} {min(sure)}<{last}"
                    )
                elif sure and dead:
                    example("acked, yet dead-lettered", f"{group} {message_id}")
                else:
                    if not (sure or deleted_last or dead):
                        verdict.lost += 1
                        example("lost", f"{group} {message_id} ({one.topic}, last attempt {last})")
                    continue
                verdict.duplicate += 1
        for text in self.dedup_broken:
            verdict.duplicate += 1
            example("deduplication broken", text)
        for d in self.deliveries:
            one = self.sent.get(d.message_id)
            if d.message_id in self.rolled_back or d.body in self.rolled_back:
                verdict.rolled_back_visible += 1
                example("rolled-back visible", f"{d.group} {d.message_id} {d.body!r}")
            elif one is None and d.body not in self.uncertain:
                verdict.unsent += 1
                example("delivered but never sent", f"{d.group} {d.message_id} {d.body!r}")
            elif one is not None and one.due_ms:
                seen_at = min(d.delivered_at, d.visible_at or d.delivered_at)
                if seen_at < one.due_ms:
                    verdict.early += 1
                    example(
                        "early",
                        f"{d.group} {d.message_id} attempt {d.attempt}: delivered at "
                        f"{d.delivered_at}, visible at {d.visible_at}, due {one.due_ms}",
                    )
        for (group, message_id), body in sorted(self.dead.items()):
            if message_id in self.rolled_back or body in self.rolled_back:
                verdict.rolled_back_visible += 1
                example("rolled-back dead-lettered", f"{group} {message_id} {body!r}")
            elif message_id not in self.sent and body not in self.uncertain:
                verdict.unsent += 1
                example("dead-lettered but never sent", f"{group} {message_id} {body!r}")
        verdict.examples = examples
        return verdict
