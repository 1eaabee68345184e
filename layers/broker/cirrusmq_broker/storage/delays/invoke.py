"""Starting a release run out of its schedule: an asynchronous Lambda invoke of the
scheduler function.

The local stack runs its functions in-process and registers its own way of starting one
(:func:`register_local`) under the function's local name; it is used instead of Lambda.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

WAKE_EVENT = {"wake": True}

_local: dict[str, Callable[[], None]] = {}
_lock = threading.Lock()


def register_local(function_name: str, start: Callable[[], None]) -> Callable[[], None]:
    """Use ``start`` to start ``function_name`` in this process; returns the undo."""
    with _lock:
        _local[function_name] = start

    def undo() -> None:
        with _lock:
            if _local.get(function_name) is start:
                del _local[function_name]

    return undo


def local_starter(function_name: str) -> Callable[[], None] | None:
    with _lock:
        return _local.get(function_name)


class FunctionStarter:
    """Starts one run of a function: in this process when the local stack registered it,
    else by Lambda (InvocationType Event: returns once queued)."""

    def __init__(self, client: Callable[[], Any], function_name: str) -> None:
        self._client = client
        self._function = function_name

    def __call__(self) -> None:
        local = local_starter(self._function)
        if local is not None:
            local()
            return
        self._client().invoke(
            FunctionName=self._function,
            InvocationType="Event",
            Payload=json.dumps(WAKE_EVENT).encode(),
        )
