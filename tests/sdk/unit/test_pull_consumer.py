"""PullConsumer against fake reads by offset (no service): positions never go back, a queue
that really ends lower, one live owner of a store's offsets."""

from __future__ import annotations

import pytest
from cirrusmq.consumer.pull import PullConsumer

from .fake_log import OneQueue, StaleEnds


def test_a_stale_queue_end_never_moves_a_position_back(tmp_path):
    consumer = PullConsumer(
        "http://x",
        None,
        "g",
        consume_from="earliest",
        max_poll_messages=5,
        offset_store_path=tmp_path / "o.db",
        transport=StaleEnds(),
    )
    consumer.assign("t")
    seen = []
    for _ in range(8):
        seen += [(m.queue, m.offset) for m in consumer.poll(0)]
    assert sorted(seen) == [(q, o) for q in (0, 1) for o in range(10)]  # each exactly once
    consumer.close()


def test_a_queue_that_really_ends_lower_goes_on_from_its_end(tmp_path):
    """A recreated topic: the read (consistent head) says InvalidOffset with the end."""
    store = tmp_path / "o.db"
    transport = StaleEnds(head=10)
    first = PullConsumer(
        "http://x", None, "g", consume_from="earliest", offset_store_path=store,
        transport=transport, instance_id="i1",
    )  # fmt: skip
    first.assign("t")
    while first.poll(0):
        pass
    first.commit()
    first.close()
    transport = StaleEnds(head=2)  # made again: 2 messages per queue
    transport.ends_checks = 5  # no stale answer in this part
    again = PullConsumer(
        "http://x", None, "g", consume_from="earliest", offset_store_path=store,
        transport=transport, instance_id="i1",
    )  # fmt: skip
    again.assign("t")
    for _ in range(3):
        again.poll(0)
    assert (again.position(0), again.position(1)) == (2, 2)
    again.close()


def test_a_second_live_owner_of_the_same_offsets_is_refused(tmp_path):
    """Two consumers (e.g. two processes on one host, default instance id = host name)
    sharing group, instance id and store would overwrite each other's offsets."""
    from cirrusmq.consumer.offset_owner import OffsetOwnerInUseError

    def consumer() -> PullConsumer:
        return PullConsumer(
            "http://x", None, "g", offset_store_path=tmp_path / "o.db", transport=OneQueue()
        )

    first = consumer()
    first.assign("t")
    second = consumer()
    with pytest.raises(OffsetOwnerInUseError):
        second.assign("t")
    first.close()  # the claim goes with its owner
    second.assign("t")
    second.close()
