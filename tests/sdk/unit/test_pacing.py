"""The push consumer's adaptive polling interval (pure logic, no clock)."""

from __future__ import annotations

import pytest
from cirrusmq.consumer.pacing import PollPacer


def test_the_interval_doubles_up_to_the_cap_while_idle():
    pacer = PollPacer(initial_interval_s=0.05, max_interval_s=1.0)
    delays = [pacer.after_receive(0) for _ in range(8)]
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_messages_reset_the_interval():
    pacer = PollPacer(initial_interval_s=0.05, max_interval_s=5.0)
    for _ in range(10):
        pacer.after_receive(0)
    assert pacer.after_receive(3) == 0.0  # while messages flow: no wait at all
    assert pacer.after_receive(1) == 0.0
    assert pacer.after_receive(0) == 0.05  # idle again: starts small


def test_reset_and_bounds():
    pacer = PollPacer(initial_interval_s=0.5, max_interval_s=0.5)
    assert [pacer.after_receive(0) for _ in range(3)] == [0.5, 0.5, 0.5]
    pacer.reset()
    assert pacer.after_receive(0) == 0.5
    with pytest.raises(ValueError):
        PollPacer(initial_interval_s=0, max_interval_s=1)
    with pytest.raises(ValueError):
        PollPacer(initial_interval_s=2, max_interval_s=1)
