"""Dead letters the previous release's redrive sent back (read only).

Before redrive claims (:mod:`~cirrusmq_broker.storage.redrive_claims`), a redrive recorded
each append as an idempotency record in ProducersTable:

- a cursor redrive (all, or by topic): ``~redrive.<group>.<DLQ base>.<topic>#<queue>``,
  sequence = the DLQ offset of the first letter it sent of that batch to that queue; it
  sent every letter of the batch for that origin queue from there on (letters redriven by
  id before were left out, and have their own record);
- a redrive by id: ``~redrive.<group>.id<offset>.<topic>#<queue>``, sequence = the offset.

A letter with such a record was sent back, so the redrive leaves it out and the listing
marks it. The candidate keys of a DLQ batch's letters are read in the same batched read as
its claims (no call per letter). The previous release's cursors are not used: they also
passed letters whose topic was gone, which were never sent back.

Removable once the DLQ retention (14 days) has passed after every deployment was upgraded
from that release: its letters and records have expired by then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LEGACY_PREFIX = "~redrive."


@dataclass(frozen=True)
class LetterOrigin:
    """A dead letter as the previous release's records name it."""

    dlq_base: int
    """Base offset of the DLQ batch holding the letter."""
    offset: int
    """The letter's DLQ offset."""
    topic: str
    """The topic it was sent back to (its origin)."""
    queue: int
    """The origin queue."""


BY_CURSOR, BY_ID = "cursor", "id"


def candidate_keys(
    group: str, letters: Iterable[LetterOrigin]
) -> dict[str, tuple[str, LetterOrigin]]:
    """Record key → (BY_CURSOR or BY_ID, letter): every record of the previous release
    that may name one of ``letters``."""
    keys: dict[str, tuple[str, LetterOrigin]] = {}
    for letter in letters:
        origin = f"{letter.topic}#{letter.queue}#{letter.offset}"
        keys[f"{LEGACY_PREFIX}{group}.{letter.dlq_base}.{origin}"] = (BY_CURSOR, letter)
        keys[f"{LEGACY_PREFIX}{group}.id{letter.offset}.{origin}"] = (BY_ID, letter)
    return keys


def sent_back(
    letters: Iterable[LetterOrigin],
    found: Iterable[str],
    keys: dict[str, tuple[str, LetterOrigin]],
) -> dict[int, frozenset[int]]:
    """DLQ base → offsets of ``letters`` the previous release sent back, given the record
    keys ``found`` among ``keys`` (from :func:`candidate_keys`)."""
    by_id: set[int] = set()
    cursor_from: dict[tuple[int, str, int], int] = {}
    for key in found:
        kind, letter = keys[key]
        if kind == BY_ID:
            by_id.add(letter.offset)
        else:
            origin = (letter.dlq_base, letter.topic, letter.queue)
            cursor_from[origin] = min(letter.offset, cursor_from.get(origin, letter.offset))
    sent: dict[int, set[int]] = {}
    for letter in letters:
        first = cursor_from.get((letter.dlq_base, letter.topic, letter.queue))
        if letter.offset in by_id or (first is not None and letter.offset >= first):
            sent.setdefault(letter.dlq_base, set()).add(letter.offset)
    return {base: frozenset(offsets) for base, offsets in sent.items()}
