"""One owner per local file: an exclusive ``flock`` on a lock file, held while it is open.

The outbox, the consumer's pending acks and the pull consumers' offsets are SQLite files that
one client at a time may own. The lock goes with its process (a crash leaves nothing to clean
up). POSIX only: elsewhere the single-owner rule is not enforced.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from .errors import MQError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no claim (documented)
    fcntl = None  # type: ignore[assignment]

__all__ = ["hold_exclusively"]


def hold_exclusively(lock_path: Path, in_use: Callable[[], MQError]) -> IO[str]:
    """Hold ``lock_path`` exclusively until the returned file is closed; ``in_use()`` is
    raised if another live owner holds it."""
    handle = open(lock_path, "a+")  # noqa: SIM115 - held open while owned
    if fcntl is None:  # pragma: no cover
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        raise in_use() from exc
    return handle
