"""next_due_ms: when an empty receive tells its consumer to look again."""

from __future__ import annotations

from cirrusmq_broker.rules.next_due import MIN_NEXT_DUE_MS, next_due_ms


def test_nothing_known_is_no_hint() -> None:
    assert next_due_ms([], 5_000) is None
    assert next_due_ms([None, None], 5_000) is None


def test_the_earliest_moment_ahead_counts() -> None:
    assert next_due_ms([None, 65_000, 15_000, 40_000], 5_000) == 10_000


def test_a_moment_already_past_is_no_hint() -> None:
    assert next_due_ms([4_000, 5_000], 5_000) is None
    assert next_due_ms([4_000, 17_000], 5_000) == 12_000


def test_a_close_moment_asks_for_a_look_in_a_second_never_sooner() -> None:
    assert next_due_ms([5_001], 5_000) == MIN_NEXT_DUE_MS == 1_000
