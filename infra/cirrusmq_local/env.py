"""Set environment variables for the in-process handlers and put the old values back after.

Patches are layers: when two stacks overlap in one process and the older one stops first,
its variables go back to what was under it without disturbing the newer stack's values.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

__all__ = ["EnvironmentPatch"]

_ABSENT: object = object()
_active: list[EnvironmentPatch] = []
_lock = threading.Lock()


class EnvironmentPatch:
    """Sets ``values`` in ``os.environ`` on :meth:`apply`; :meth:`restore` undoes exactly that
    (variables the patch did not set are left alone)."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)
        self._saved: dict[str, object] = {}

    @property
    def applied(self) -> bool:
        """Whether the patch is in force."""
        return self in _active

    @staticmethod
    def active_count() -> int:
        """How many patches are in force in this process."""
        return len(_active)

    def apply(self) -> None:
        """Remember the current values of the affected variables, then set the new ones."""
        with _lock:
            if self in _active:
                return
            self._saved = {key: os.environ.get(key, _ABSENT) for key in self.values}
            os.environ.update(self.values)
            _active.append(self)

    def restore(self) -> None:
        """Put back what was under this patch; idempotent."""
        with _lock:
            if self not in _active:
                return
            above = _active[_active.index(self) + 1 :]
            for key, old in self._saved.items():
                upper = next((patch for patch in above if key in patch.values), None)
                if upper is not None:
                    upper._saved[key] = old  # the newer patch restores to what was under us
                elif old is _ABSENT:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = str(old)
            _active.remove(self)
            self._saved = {}
