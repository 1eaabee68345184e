"""The key filter of a batch: a small Bloom filter of its messages' keys.

Each batch's index item carries one, so a lookup by key reads only the batch objects whose
filter may hold the key (no write per message). The bytes are a fixed layout, read by
other processes and later versions, so the hash is BLAKE2b (stdlib, fixed by RFC 7693),
never Python's per-process ``hash()``:

- byte 0: layout version (1); byte 1: the number of hashes ``k``; then the bit array,
  bit ``i`` in byte ``i // 8`` at ``1 << (i % 8)``; ``m`` = 8 × its length.
- a key's bits: ``d = blake2b(utf8(key), digest_size=4·k, person=PERSON)``; bit ``j``
  of the key is bytes ``4j..4j+3`` of ``d`` as a little-endian integer, ``mod m``, for
  ``j`` in ``0..k-1`` (independent positions: double hashing correlates them in the small
  arrays of small batches, doubling their false positives).

The array takes ``BITS_PER_KEY`` bits per distinct key (false positives about 0.8 %)
up to ``MAX_FILTER_BYTES``; beyond that it stays at that size with fewer bits per key
(more false positives), and below ``MIN_BITS_PER_KEY`` no filter is kept at all: the
batch is then read by every lookup, as are batches indexed before filters existed.
A batch without keys has an empty array: no lookup reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

VERSION = 1
HASHES = 7
"""``k``: optimal for 10 bits per key (10 · ln 2 ≈ 6.9)."""
MAX_HASHES = 16
"""A BLAKE2b digest is at most 64 bytes: 16 positions of 4 bytes."""
BITS_PER_KEY = 10
MIN_BITS_PER_KEY = 5
"""Below this (false positives about 14 %) the filter is not worth its bytes."""
MAX_FILTER_BYTES = 1024
"""Bounds the index item (and its write units): 819 keys at full precision, 1,638 at most."""
PERSON = b"cirrusmq-keys-v1"
HEADER_BYTES = 2


def build(keys: Iterable[str]) -> bytes | None:
    """The filter of ``keys`` (None: too many distinct keys, treat as "may hold any")."""
    distinct = set(keys)
    size = min(-(-len(distinct) * BITS_PER_KEY // 8), MAX_FILTER_BYTES)
    if distinct and size * 8 < len(distinct) * MIN_BITS_PER_KEY:
        return None
    bits = bytearray(size)
    for key in distinct:
        for position in _positions(key, size * 8, HASHES):
            bits[position >> 3] |= 1 << (position & 7)
    return bytes([VERSION, HASHES]) + bytes(bits)


def may_contain(key_filter: bytes | None, key: str) -> bool:
    """Whether a batch with ``key_filter`` may hold ``key`` (no filter, or one of a layout
    this code does not know: it may)."""
    if key_filter is None or len(key_filter) < HEADER_BYTES or key_filter[0] != VERSION:
        return True
    if not 1 <= key_filter[1] <= MAX_HASHES:
        return True
    bits = key_filter[HEADER_BYTES:]
    if not bits:
        return False
    return all(bits[p >> 3] & (1 << (p & 7)) for p in _positions(key, len(bits) * 8, key_filter[1]))


def _positions(key: str, m: int, k: int) -> list[int]:
    digest = hashlib.blake2b(
        key.encode("utf-8", "surrogatepass"), digest_size=4 * k, person=PERSON
    ).digest()
    return [int.from_bytes(digest[4 * j : 4 * j + 4], "little") % m for j in range(k)]
