"""Faults at AWS calls, injected through botocore's event hooks on the broker's clients.

At the ``n``-th AWS call of an armed operation the injector does one of:

- ``error``: the call fails before it is sent (a throttle or a transient fault);
- ``lost``: the call succeeds, then its answer is lost (a timeout after the write landed);
- ``crash``: the process dies before the call (no AWS call is made from then on);
- ``crash-after``: the process dies after the call succeeded;
- ``resent``: the call succeeds, its answer is lost and botocore sends it again; the caller
  sees the second answer (what SDK retries of a timed-out request do). A request with an
  idempotency token (TransactWriteItems' ClientRequestToken) gets its first answer again,
  as DynamoDB gives it (moto does not);
- ``stale``: an eventually consistent read (a DynamoDB GetItem or Query without
  ``ConsistentRead``) misses the newest write: GetItem finds nothing, Query misses the
  newest item it would return (moto always reads consistently).

It can also pause an operation before its ``n``-th call, or before its ``n``-th call of a
named AWS operation (``TransactWriteItems``: the guarded write of a move, a release, a
cancel, a commit or an append), while the caller runs another operation, then resume it:
the interleavings of two containers.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError
from cirrusmq_broker.errors import StorageUnavailable, Throttled

KINDS = ("error", "lost", "crash", "crash-after", "resent", "stale")


class Crash(BaseException):
    """The process dies here: nothing it does afterwards reaches AWS."""


@dataclass(frozen=True)
class Fault:
    """Inject ``kind`` at the ``at``-th AWS call (0-based) of the operation."""

    at: int
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}@{self.at}"


class Injector:
    """One per process: the clients' hooks consult it; armed only around an operation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed: set[int] = set()
        self.thread: int | None = None
        self.fault: Fault | None = None
        self.pause_at: int | None = None
        self.pause_before: str | None = None
        """Pause before a call of this AWS operation (after ``pause_skip`` of them)."""
        self.pause_skip = 0
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.calls = 0
        self.dead = False
        self.injected = 0
        self.fired: str | None = None
        """What was injected during the current operation (for the history)."""
        self._resending = False

    def install(self, client: Any) -> None:
        """Hook ``client`` (boto3 clients are shared per process: once each)."""
        with self._lock:
            if id(client) in self._installed:
                return
            self._installed.add(id(client))
        events = client.meta.events
        events.register("before-parameter-build.*.*", self._remember_params)
        events.register_first("before-call.*.*", self._before_call)
        events.register_last("after-call.*.*", self._after_call)
        self._clients = getattr(self, "_clients", {})
        self._clients[client.meta.service_model.service_name] = client

    # ------------------------------------------------------------------ arming
    def arm(
        self,
        fault: Fault | None,
        pause_at: int | None = None,
        pause_before: str | None = None,
        pause_skip: int = 0,
    ) -> None:
        """Count the current thread's AWS calls from now on and inject ``fault``; pause
        before call ``pause_at``, or before the ``pause_skip``-th (0-based) call of the
        operation ``pause_before``."""
        self.thread = threading.get_ident()
        self.fault, self.pause_at = fault, pause_at
        self.pause_before, self.pause_skip = pause_before, pause_skip
        self.calls, self.dead, self.fired = 0, False, None
        self.paused.clear()
        self.resume.clear()

    def disarm(self) -> None:
        self.thread, self.fault, self.pause_at, self.dead = None, None, None, False
        self.pause_before = None

    def _mine(self) -> bool:
        return (
            self.thread is not None and threading.get_ident() == self.thread and not self._resending
        )

    # ------------------------------------------------------------------ hooks
    def _remember_params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self._mine():
            context["reliability_params"] = copy.deepcopy(params)

    def _before_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self._mine():
            return
        if self.dead:
            raise Crash()
        n = self.calls
        self.calls += 1
        context["reliability_call"] = n
        if self.pause_at is not None and n == self.pause_at:
            self.pause_at = None
            self.paused.set()
            self.resume.wait(60)
        if self.pause_before is not None and model.name == self.pause_before:
            if self.pause_skip > 0:
                self.pause_skip -= 1
            else:
                self.pause_before = None
                self.paused.set()
                self.resume.wait(60)
        fault = self.fault
        if fault is None or fault.at != n:
            return
        where = f"{model.service_model.service_name}:{model.name}"
        if fault.kind == "error":
            self._fire(f"error before {where}")
            raise (Throttled if n % 2 else StorageUnavailable)(f"injected fault before {where}")
        if fault.kind == "crash":
            self._fire(f"crash before {where}")
            self.dead = True
            raise Crash()

    def _after_call(
        self,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        if not self._mine() or context.get("reliability_call") is None:
            return
        fault = self.fault
        if fault is None or fault.at != context["reliability_call"]:
            return
        if getattr(http_response, "status_code", 200) >= 300:
            return  # it failed by itself: nothing landed to lose
        where = f"{model.service_model.service_name}:{model.name}"
        if fault.kind == "lost":
            self._fire(f"answer lost after {where}")
            raise StorageUnavailable(f"injected: the answer of {where} was lost")
        if fault.kind == "crash-after":
            self._fire(f"crash after {where}")
            self.dead = True
            raise Crash()
        if fault.kind == "stale":
            self._stale(model.name, context.get("reliability_params", {}), parsed, where)
            return
        if fault.kind == "resent":
            params = context.get("reliability_params", {})
            if "ClientRequestToken" in params:  # DynamoDB answers a resent token the same
                self._fire(f"answer lost after {where}, resent with its token")
                return
            self._fire(f"answer lost after {where}, resent")
            client = self._clients[model.service_model.service_name]
            self._resending = True
            try:
                second = getattr(client, xform_name(model.name))(**params)
            except ClientError as exc:
                raise exc
            finally:
                self._resending = False
            body = parsed.get("Body")
            parsed.clear()
            parsed.update(second)
            if body is not None and "Body" not in second:
                parsed["Body"] = body

    def _stale(
        self, operation: str, params: dict[str, Any], parsed: dict[str, Any], where: str
    ) -> None:
        if params.get("ConsistentRead"):
            return
        if operation == "GetItem" and "Item" in parsed:
            del parsed["Item"]
        elif operation == "Query" and parsed.get("Items") and "LastEvaluatedKey" not in parsed:
            newest = 0 if params.get("ScanIndexForward") is False else -1
            del parsed["Items"][newest]
            parsed["Count"] = len(parsed["Items"])
        else:
            return
        self._fire(f"stale read of {where}")

    def _fire(self, what: str) -> None:
        self.injected += 1
        self.fired = what


INJECTOR = Injector()
