"""SQS standard-queue visibility in the model-based test: rules of sqs_rules.py's optional set
(mixed in only by a search that lists them, rulesets.py) on a standard queue ``vq``.

The rules send (one message, or a batch of 3 going to one topic queue), receive (1, 2 or 10
messages, visibility 0, 5 or 30 s; faults at AWS calls), delete and change the visibility
(0, 5 or 40 s) through any handle a receive returned (the latest or an older one), race a
receive with another request on the other container, and let time pass (``sqs_wait``).
Receives of visibility 0 (peeks) and expired leases drive the redelivery in place of a
group whose redelivery is immediate, and the receive that serves the queue whose lease
expired first before the others.

The model is SQS's for a standard queue (no order): a message is never received while its
visibility timeout runs (``redelivered-while-invisible``: two receivers never hold it at
once), never after a delete through its latest handle answered ok (``acked-redelivered``),
never a second copy of one send (``stored-twice``). A delete through its latest handle
answers ok (``sqs-delete``); a delete through an older handle (it was received again since)
answers ok and deletes nothing. At rest, the clock past every timeout, the queue drained
(each message received deleted), each message whose send answered ok was deleted (``lost``).

A request that failed (a fault, a crash) may have taken effect: a receive may have leased
what was visible, a delete deleted, a change changed. The messages it may have touched are
``uncertain`` (no judgement of their visibility) until a receive returns them again.
"""

from __future__ import annotations

from typing import Any

from cirrusmq_api.compat.sqs import message_actions, queue_actions
from faults import KINDS, Fault
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

STANDARD_QUEUE = "vq"
VISIBILITIES_S = (0, 5, 30)
CHANGES_S = (0, 5, 40)
MOSTS = (1, 2, 10)
_picks = st.integers(0, 63)
_containers = st.integers(0, 1)
_faults = st.one_of(
    st.none(),
    st.builds(Fault, at=st.integers(0, 14), kind=st.sampled_from(KINDS)),
)


class SqsStandardRules(VisibilityChanges):
    """Mixed into SqsRules (the machine's ``_run``, ``_interleave``, ``_violate``, ``clock``,
    ``log``, ``counter``; SqsRules' ``_sq_call``, ``_sq_op``; SqsFifoRules' ``_sg_action``,
    ``_sg_failed``)."""

    def _sv_setup(self) -> None:
        self.sv_ready = False
        self.sv = QueueModel()

    def _sv_ready(self, b: int) -> None:
        """The standard queue (once per history, on container ``b``, without faults)."""
        if self.sv_ready:
            return
        self.sv_ready = True
        answer = queue_actions.create_queue(self._sq_call(b), {"QueueName": STANDARD_QUEUE})
        self.sv.url = answer["QueueUrl"]
        self.log.append(f"[{b}] sqs queue {STANDARD_QUEUE} (standard)")

    # ------------------------------------------------------------------ requests
    def _sv_send(self, p: int) -> Any:
        model = self.sv
        bodies = []
        for _ in range(3 if p % 3 == 0 else 1):
            self.counter += 1
            bodies.append(f"v{self.counter}")
            model.msgs[bodies[-1]] = SqsMsg(bodies[-1])
        entries = [{"Id": str(n), "MessageBody": body} for n, body in enumerate(bodies)]
        params = {"QueueUrl": model.url, "Entries": entries}

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok" or not value.ok:
                if outcome == "ok" and not self._sg_failed(f"send {bodies}", value):
                    self._violate("internal-error", f"send {bodies} refused: {value.code}")
                return
            for entry in value.result.get("Successful", []):
                msg = model.msgs[bodies[int(entry["Id"])]]
                msg.message_id, msg.required = entry["MessageId"], True

        return self._sq_op(
            f"sqs send {STANDARD_QUEUE} {' '.join(bodies)}",
            self._sg_action(message_actions.send_message_batch, params),
            apply,
        )

    def _sv_receive(self, most: int, visibility: int) -> Any:
        model = self.sv
        params = {"QueueUrl": model.url, "MaxNumberOfMessages": most, "WaitTimeSeconds": 0,
                  "VisibilityTimeout": visibility}  # fmt: skip

        def apply(outcome: str, value: Any) -> None:
            if outcome != "ok" or not value.ok:
                if outcome == "ok" and not self._sg_failed("receive", value):
                    self._violate("internal-error", f"receive refused: {value.code}")
                may_have_leased(model, self.clock.now)
                return
            messages = value.result.get("Messages", [])
            self._sv_received([(x["Body"], x["ReceiptHandle"]) for x in messages], visibility)

        return self._sq_op(
            f"sqs receive {STANDARD_QUEUE} max {most} visibility {visibility}s",
            self._sg_action(message_actions.receive_message, params),
            apply,
        )

    def _sv_received(self, answer: list[tuple[str, str]], visibility: int) -> None:
        """Judge a receive's answer, then record it."""
        model, now = self.sv, self.clock.now
        seen: set[str] = set()
        for body, _ in answer:
            m = model.msgs.get(body)
            if m is None:
                self._violate("unsent-delivered", f"{body} from {STANDARD_QUEUE}: never sent")
                continue
            if not m.required or body in seen:
                self._violate("stored-twice", f"{body}: a second copy of one send")
            seen.add(body)
            if m.surely_deleted:
                self._violate("acked-redelivered", f"{body}: received after its delete")
            if not m.uncertain and m.deadline > now:
                self._violate(
                    "redelivered-while-invisible",
                    f"{body}: received while its visibility timeout runs (to {m.deadline})",
                )
        record_received(model, answer, now, visibility)

    def _sv_delete(self, handle: str, h: Handle) -> Any:
        model = self.sv
        m = model.msgs[h.body]
        params = {"QueueUrl": model.url, "ReceiptHandle": handle}

        def apply(outcome: str, value: Any) -> None:
            latest = handle == m.handle
            if outcome != "ok" or not value.ok and self._sg_failed("delete", value):
                if latest:
                    m.deleted = m.uncertain = True  # it may have deleted
                return
            if value.ok:
                if latest:
                    m.deleted = m.surely_deleted = True
            elif latest and not m.uncertain and not m.surely_deleted:
                self._violate(
                    "sqs-delete",
                    f"{h.body}: a delete through its latest handle refused ({value.code})",
                )

        return self._sq_op(
            f"sqs delete {h.body} (handle of its receive {h.serial})",
            self._sg_action(message_actions.delete_message, params),
            apply,
        )

    def _sv_change(self, handle: str, h: Handle, seconds: int) -> Any:
        return self._change_op(self.sv, handle, h, seconds, older_too=True)

    def _sv_handle(self, p: int) -> tuple[str, Handle]:
        return pick_handle(self.sv, p)

    def _sv_other(self, kind: int, p: int, q: int) -> Any:
        """The request raced against a receive: another receive, a delete or a change."""
        if kind % 3 == 0 or not self.sv.handles:
            return self._sv_receive(MOSTS[q % 3], VISIBILITIES_S[p % 3])
        handle, h = self._sv_handle(p)
        if kind % 3 == 1:
            return self._sv_delete(handle, h)
        return self._sv_change(handle, h, CHANGES_S[q % 3])

    # ------------------------------------------------------------------ the rules
    @rule(b=_containers, p=_picks)
    def sqs_std_send(self, b: int, p: int) -> None:
        self._sv_ready(b)
        self._run(b, None, self._sv_send(p))

    @rule(b=_containers, p=_picks, q=_picks, fault=_faults)
    def sqs_std_receive(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._sv_ready(b)
        self._run(b, fault, self._sv_receive(MOSTS[q % 3], VISIBILITIES_S[p % 3]))

    @precondition(lambda self: getattr(self, "sv_ready", False) and self.sv.handles)
    @rule(b=_containers, p=_picks, fault=_faults)
    def sqs_std_delete(self, b: int, p: int, fault: Fault | None) -> None:
        self._run(b, fault, self._sv_delete(*self._sv_handle(p)))

    @precondition(lambda self: getattr(self, "sv_ready", False) and self.sv.handles)
    @rule(b=_containers, p=_picks, q=_picks, fault=_faults)
    def sqs_std_change(self, b: int, p: int, q: int, fault: Fault | None) -> None:
        self._run(b, fault, self._sv_change(*self._sv_handle(p), CHANGES_S[q % 3]))

    @rule(b=_containers, at=st.integers(0, 12), kind=_picks, p=_picks, q=_picks)
    def sqs_std_race(self, b: int, at: int, kind: int, p: int, q: int) -> None:
        """A receive paused before its ``at``-th AWS call while another receive, a delete
        or a change runs on the other container."""
        self._sv_ready(b)
        receive = self._sv_receive(MOSTS[p % 3], VISIBILITIES_S[q % 3])
        self._interleave(b, receive, at, self._sv_other(kind, p, q))

    # ------------------------------------------------------------------ at rest
    def _sv_at_rest(self) -> None:
        """The clock past every timeout, the queue drained (each message received is
        deleted); then each message whose send answered ok was deleted."""
        if not self.sv_ready:
            return
        for _ in range(3):
            self.clock.advance(max(CHANGES_S + VISIBILITIES_S) + 1)
            drain(
                self.sv,
                lambda: self._run(0, None, self._sv_receive(10, 30)),
                lambda handle, h: self._run(0, None, self._sv_delete(handle, h)),
            )
        for body, m in self.sv.msgs.items():
            if m.required and not m.deleted:
                self._violate("lost", f"{body} was never deleted")
