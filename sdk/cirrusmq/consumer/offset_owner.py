"""One live owner per (consumer instance, topic) of a local offset store.

Pull and broadcast consumers keep their offsets in SQLite under ``<group>/<instance id>``;
the default instance id is the host name (stable across restarts, so a restarted consumer
goes on from its offsets). Two processes on one host sharing that id would overwrite each
other's offsets, so the owner is claimed with an exclusive ``flock`` on a lock file next to
the store: a second live owner is refused with :class:`OffsetOwnerInUseError`; the lock
goes with its process (a crash leaves nothing to clean up).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import IO

from ..errors import MQError
from ..file_lock import hold_exclusively

__all__ = ["OffsetOwnerInUseError", "claim_owner"]


class OffsetOwnerInUseError(MQError):
    """Another live consumer (in this or another process) reads this topic with the same
    group and instance id on the same offset store: give each an ``instance_id``."""


def claim_owner(store_path: Path, owner: str, topic: str) -> IO[str]:
    """Hold ``owner``'s claim on ``topic`` until the returned file is closed."""
    folder = Path(f"{store_path}.owners")
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(f"{owner}\n{topic}".encode()).hexdigest()[:32]
    return hold_exclusively(
        folder / f"{name}.lock",
        lambda: OffsetOwnerInUseError(
            f"{owner} already reads {topic} with the offsets in {store_path} (another "
            "process or consumer on this host): give each consumer its own instance_id",
            code="OffsetOwnerInUse",
        ),
    )
