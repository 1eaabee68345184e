"""The key filter: a fixed byte layout, no false negatives, a bounded false-positive rate."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from cirrusmq_broker.rules import key_filter

KEYS = ["order-1", "order-2", "用户-42"]
PINNED_FILTER = "0107d54f7baa"
"""Layout version 1, 7 hashes, then 4 bytes of bits (3 keys at 10 bits each)."""


def test_the_bytes_of_a_filter_are_pinned_and_the_same_in_every_process():
    """Other processes and later versions read these bytes: the hash is BLAKE2b, never
    Python's salted hash(); a changed layout must change VERSION."""
    built = key_filter.build(KEYS).hex()
    assert built.startswith("0107") and len(built) == 2 * (2 + 4)
    code = f"from cirrusmq_broker.rules import key_filter;print(key_filter.build({KEYS!r}).hex())"
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert out.stdout.strip() == built
    assert built == PINNED_FILTER


def test_every_key_of_a_batch_may_be_in_its_filter():
    rng = random.Random(7)
    for size in (1, 10, 100, 800, 1500):
        keys = [f"k-{rng.getrandbits(64):x}" for _ in range(size)]
        built = key_filter.build(keys)
        assert built is not None and len(built) <= key_filter.HEADER_BYTES + 1024
        assert all(key_filter.may_contain(built, k) for k in keys)


def test_false_positives_stay_near_one_percent_at_ten_bits_per_key():
    rng = random.Random(11)
    hits = probes = 0
    for _ in range(500):
        keys = [f"key-{rng.getrandbits(64):x}" for _ in range(rng.randint(1, 100))]
        built = key_filter.build(keys)
        for _ in range(40):
            probes += 1
            hits += key_filter.may_contain(built, f"absent-{rng.getrandbits(64):x}")
    assert hits / probes < 0.015  # theory: 0.82 % (k=7, 10 bits per key)


def test_a_batch_without_keys_is_never_read_and_one_without_a_filter_always():
    assert not key_filter.may_contain(key_filter.build([]), "any")
    assert key_filter.may_contain(None, "any")
    assert key_filter.may_contain(b"\x09\x07\xff", "any")  # a layout this code does not know


def test_too_many_distinct_keys_keep_no_filter():
    limit = key_filter.MAX_FILTER_BYTES * 8 // key_filter.MIN_BITS_PER_KEY
    assert key_filter.build(f"k{i}" for i in range(limit)) is not None
    assert key_filter.build(f"k{i}" for i in range(limit + 1)) is None
    assert len(key_filter.build(["same"] * 5000)) == key_filter.HEADER_BYTES + 2


def test_false_positives_of_small_batches_stay_near_theory():
    """Ten keys take a 104-bit array: hash positions must not be correlated."""
    rng = random.Random(13)
    hits = probes = 0
    for _ in range(2000):
        built = key_filter.build(f"key-{rng.getrandbits(64):x}" for _ in range(10))
        for _ in range(10):
            probes += 1
            hits += key_filter.may_contain(built, f"absent-{rng.getrandbits(64):x}")
    assert hits / probes < 0.011  # theory: 0.69 % for m=104, n=10, k=7
