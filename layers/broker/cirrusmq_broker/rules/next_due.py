"""When an empty receive tells its consumer to look again (a receive response's
``next_due_ms``).

Nothing announces a message that comes back without an append a waiting consumer is told
about: a lease of another consumer ending (its expiry then moves the message to the retry
topic, due after the backoff), a retry in its backoff becoming visible. A receive that
delivers nothing knows, from what it read anyway, the earliest of those moments: the
group's lease deadlines on the topic's queues and on its retry topic, and when the next
retry batch becomes visible. It is a hint to look again then, not a promise (a lease may
be acked meanwhile; its expiry is followed by the retry's backoff), so it is floored: a
consumer never polls in a tight loop on it.
"""

from __future__ import annotations

from collections.abc import Iterable

MIN_NEXT_DUE_MS = 1_000
"""The shortest hint: a moment already close (or a bound that is stale-low) asks for a
look in a second, never sooner."""


def next_due_ms(moments: Iterable[int | None], now: int) -> int | None:
    """Milliseconds from ``now`` until the earliest of ``moments`` (ms since the epoch;
    None: none) still ahead, at least :data:`MIN_NEXT_DUE_MS`; None when none is ahead.
    A moment already past is left out: the receive just looked at it (moved it, or left
    it to its next pass), so it is no reason to look again at once."""
    ahead = [m for m in moments if m is not None and m > now]
    return max(MIN_NEXT_DUE_MS, min(ahead) - now) if ahead else None
