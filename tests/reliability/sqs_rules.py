"""The SQS adapter's PurgeQueue in the model-based test: rules mixed into machine.py's
machine only by a search that lists them (rulesets.py: ``--rules`` with ``sqs_`` rules, the
PURGE aim of mutants.py), so the general search's histories stay as they are.

Two queues through the SQS adapter's own actions (``cirrusmq_api.compat.sqs``, called
in-process with an admin principal): a FIFO queue ``pf.fifo`` whose sends carry one of three
deduplication ids, and a standard queue ``pd`` whose sends are delayed 5 to 30 s. The rules
send, receive (each message received is deleted at once: nothing is left in flight across
a purge) and purge either queue. A purge comes a millisecond after what was sent before it
(the adapter dates a purge, and the messages a purge deletes, in ms).

The model: a purge deletes what was sent before it, delayed or not, and starts the FIFO
deduplication afresh. So a message sent before a purge is never delivered after it
(``purged-delivered``); a FIFO send after a purge that answers the id of a send before it
stored nothing (``lost``); a FIFO send repeating the deduplication id of a send since the
last purge, within SQS's 5-minute deduplication interval of that send, answers that send's
id and stores nothing (else ``stored-twice``); at rest (the clock past every delay, both
queues drained) each message sent since its queue's last purge whose send answered a new
id was delivered (``lost``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cirrusmq_api.compat.sqs import message_actions, queue_actions
from cirrusmq_api.compat.sqs.context import Call
from cirrusmq_broker.rules.permissions import Permissions
from cirrusmq_broker.services.auth import Principal
from hypothesis import strategies as st
from hypothesis.stateful import rule
from sqs_fifo_rules import SqsFifoRules
from sqs_standard_rules import SqsStandardRules

FIFO_QUEUE, DELAY_QUEUE = "pf.fifo", "pd"
ENDPOINT = "http://sqs.local"
ADMIN = Principal("reliability-admin", Permissions(admin=True))
DEDUP_INTERVAL_MS = 5 * 60 * 1000
"""SQS's deduplication interval, counted from a deduplication id's first accepted send."""

_picks = st.integers(0, 63)
_containers = st.integers(0, 1)


@dataclass
class Sent:
    """One message sent to a queue of these rules."""

    queue: str
    epoch: int
    """The queue's purges answered before its send."""
    required: bool = False
    """Its send answered a new message id: it must be delivered unless a purge came after."""
    message_id: str = ""
    sent_at: int = 0
    """The clock (ms) when its send ran."""


@dataclass
class QueueModel:
    url: str = ""
    epoch: int = 0
    """Purges of the queue answered."""
    dedup: dict[str, Sent] = field(default_factory=dict)
    """FIFO: deduplication id → the send that stored it (since the last purge)."""


class SqsRules(SqsFifoRules, SqsStandardRules):
    """Mixed into the machine: ``_run``, ``_violate``, ``world``, ``clock`` and ``log`` are
    the machine's."""

    def _setup(self) -> None:
        super()._setup()  # type: ignore[misc]
        self._sqs_setup()

    def _check_at_rest(self) -> None:
        super()._check_at_rest()  # type: ignore[misc]
        self._sqs_at_rest()
        self._sg_at_rest()
        self._sv_at_rest()

    def _sqs_setup(self) -> None:
        self.sq_ready = False
        self.sq_queues = {FIFO_QUEUE: QueueModel(), DELAY_QUEUE: QueueModel()}
        self.sq_sent: dict[bytes, Sent] = {}
        self.sq_delivered: set[bytes] = set()
        self._sg_setup()
        self._sv_setup()

    def _sq_call(self, b: int) -> Call:
        return Call(broker=self.world.brokers[b], principal=ADMIN, endpoint=ENDPOINT,
                    region="us-east-1")  # fmt: skip

    def _sq_ready(self, b: int) -> None:
        """Both queues (once per history, on container ``b``, without faults)."""
        if self.sq_ready:
            return
        self.sq_ready = True
        call = self._sq_call(b)
        for name, attributes in ((FIFO_QUEUE, {"FifoQueue": "true"}), (DELAY_QUEUE, {})):
            answer = queue_actions.create_queue(call, {"QueueName": name, "Attributes": attributes})
            self.sq_queues[name].url = answer["QueueUrl"]
        self.log.append(f"[{b}] sqs queues {FIFO_QUEUE} (deduplicating), {DELAY_QUEUE}")

    def _sq_op(self, what: str, call: Any, apply: Any) -> Any:
        from machine import Op  # the machine's module imports this one

        return Op(what, call, apply, moves_groups=False)

    def _sq_send(self, name: str, p: int) -> Any:
        self.counter += 1
        body = f"q{self.counter}".encode()
        queue = self.sq_queues[name]
        sent = Sent(name, queue.epoch, sent_at=self.clock())
        self.sq_sent[body] = sent
        params: dict[str, Any] = {"QueueUrl": queue.url, "MessageBody": body.decode()}
        if name == FIFO_QUEUE:
            dedup = f"d{p % 3}"
            params.update(MessageGroupId="g", MessageDeduplicationId=dedup)
            what = f"sqs send {name} {body.decode()} dedup {dedup}"
        else:
            params["DelaySeconds"] = 5 + p % 26
            what = f"sqs send {name} {body.decode()} delayed {params['DelaySeconds']}s"

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            sent.message_id = value["MessageId"]
            if name != FIFO_QUEUE:
                sent.required = True
                return
            first = queue.dedup.get(params["MessageDeduplicationId"])
            if first is not None and first.message_id == sent.message_id:
                return  # a repeat within the window since the last purge: stored nothing
            if first is not None and sent.sent_at - first.sent_at < DEDUP_INTERVAL_MS:
                self._violate(
                    "stored-twice",
                    f"{body!r}: repeats {params['MessageDeduplicationId']} of "
                    f"{first.message_id} {(sent.sent_at - first.sent_at) / 1000:g} s after it, "
                    f"answered another id ({sent.message_id}): stored again",
                )
            earlier = [s for s in self.sq_sent.values() if s.message_id == sent.message_id]
            if any(s.epoch < queue.epoch and s.queue == name for s in earlier):
                self._violate(
                    "lost",
                    f"{body!r}: sent after a purge of {name}, answered the id of a message "
                    f"sent before it ({sent.message_id}): stored nothing",
                )
            sent.required = True
            queue.dedup[params["MessageDeduplicationId"]] = sent

        return self._sq_op(
            what,
            lambda broker: message_actions.send_message(self._sq_call_on(broker), params),
            apply,
        )

    def _sq_call_on(self, broker: Any) -> Call:
        return Call(broker=broker, principal=ADMIN, endpoint=ENDPOINT, region="us-east-1")

    def _sq_receive(self, name: str) -> Any:
        queue = self.sq_queues[name]

        def call(broker: Any) -> list[tuple[str, str]]:
            c = self._sq_call_on(broker)
            answer = message_actions.receive_message(
                c, {"QueueUrl": queue.url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0,
                    "VisibilityTimeout": 30},
            )  # fmt: skip
            bodies = []  # (queue, body): shown by the history as the body
            for message in answer.get("Messages", []):
                bodies.append((name, message["Body"]))
                message_actions.delete_message(
                    c, {"QueueUrl": queue.url, "ReceiptHandle": message["ReceiptHandle"]}
                )
            return bodies

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok":
                return
            for _, text in value:
                body = text.encode()
                sent = self.sq_sent.get(body)
                if sent is None:
                    self._violate("unsent-delivered", f"{body!r} from {name}: never sent")
                elif sent.epoch < queue.epoch:
                    self._violate(
                        "purged-delivered",
                        f"{body!r} from {name}: sent before the queue's purge {queue.epoch}",
                    )
                self.sq_delivered.add(body)

        return self._sq_op(f"sqs receive {name} (and delete)", call, apply)

    def _sq_purge(self, name: str) -> Any:
        queue = self.sq_queues[name]

        def call(broker: Any) -> dict[str, Any]:
            self.clock.advance(0.001)
            return queue_actions.purge_queue(self._sq_call_on(broker), {"QueueUrl": queue.url})

        def apply(outcome: str, value: Any) -> None:
            if outcome == "ok":
                queue.epoch += 1
                queue.dedup.clear()

        return self._sq_op(f"sqs purge {name} (clock +1ms)", call, apply)

    # ------------------------------------------------------------------ the rules
    @rule(b=_containers, p=_picks, q=_picks)
    def sqs_send(self, b: int, p: int, q: int) -> None:
        self._sq_ready(b)
        self._run(b, None, self._sq_send((FIFO_QUEUE, DELAY_QUEUE)[q % 2], p))

    @rule(b=_containers, q=_picks)
    def sqs_receive(self, b: int, q: int) -> None:
        self._sq_ready(b)
        self._run(b, None, self._sq_receive((FIFO_QUEUE, DELAY_QUEUE)[q % 2]))

    @rule(b=_containers, q=_picks)
    def sqs_purge(self, b: int, q: int) -> None:
        self._sq_ready(b)
        self._run(b, None, self._sq_purge((FIFO_QUEUE, DELAY_QUEUE)[q % 2]))

    @rule(seconds=st.sampled_from((1, 5, 11, 31)))
    def sqs_wait(self, seconds: int) -> None:
        """Time passes (delays end, leases expire)."""
        self.clock.advance(seconds)
        self.log.append(f"clock +{seconds}s")

    # ------------------------------------------------------------------ at rest
    def _sqs_at_rest(self) -> None:
        """The clock past every delay, both queues drained; then each message sent since
        its queue's last purge with a new id must have been delivered."""
        if not self.sq_ready:
            return
        for _ in range(3):
            self.clock.advance(31)
            self._run(0, None, self._op_tick(0, 0))  # the delayed messages due now
            for name in (FIFO_QUEUE, DELAY_QUEUE):
                for _ in range(20):
                    before = len(self.sq_delivered)
                    self._run(0, None, self._sq_receive(name))
                    if len(self.sq_delivered) == before:
                        break
        for body, sent in self.sq_sent.items():
            queue = self.sq_queues[sent.queue]
            if sent.required and sent.epoch == queue.epoch and body not in self.sq_delivered:
                self._violate("lost", f"{body!r} ({sent.queue}) was never delivered")
