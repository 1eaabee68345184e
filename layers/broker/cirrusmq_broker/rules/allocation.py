"""Queue allocation among a group's live consumers (pure rules).

RocketMQ's default strategy, ``AllocateMessageQueueAveragely``: consumer ids and queues are
sorted; each consumer takes one contiguous range, the first ``len(queues) % len(consumers)``
consumers one queue more than the others; with more consumers than queues, the last ones
get none. Every member computes the same answer from the same membership, so no
coordination is needed beyond the membership itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def allocate_averagely(consumers: Iterable[str], queues: Iterable[int], client: str) -> list[int]:
    """The queues ``client`` owns among ``consumers`` (empty if it is not one of them)."""
    cids = sorted(set(consumers))
    mqs = sorted(set(queues))
    if client not in cids or not mqs:
        return []
    index, n, m = cids.index(client), len(cids), len(mqs)
    mod = m % n
    if m <= n:
        size = 1
    elif mod > 0 and index < mod:
        size = m // n + 1
    else:
        size = m // n
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, m - start)
    return [mqs[(start + i) % m] for i in range(max(0, count))]


def assignment(consumers: Iterable[str], queues: Sequence[int]) -> dict[str, list[int]]:
    """Consumer id → its queues, for every consumer."""
    cids = sorted(set(consumers))
    return {cid: allocate_averagely(cids, queues, cid) for cid in cids}
