from cirrusmq_broker.group_state import GroupQueueState


def state() -> GroupQueueState:
    return GroupQueueState("g", "t", 0)


def test_lease_new_skips_filtered_offsets_and_commits_when_acked():
    s = state()
    lease = s.lease_new(5, delivered=[1, 3], cursor_base=5, now=0, invisible_ms=1000)
    assert lease is not None and (lease.start, lease.end, lease.attempt) == (0, 5, 1)
    assert s.cursor == 5 and s.settled_offset() == 1  # 0 was filtered out
    s.acked.update({1})
    assert s.settled_offset() == 3
    s.acked.update({3})
    s.compact()
    assert (s.committed, s.leases, s.acked) == (5, {}, set())


def test_all_filtered_creates_no_lease():
    s = state()
    assert s.lease_new(3, delivered=[], cursor_base=3, now=0, invisible_ms=1000) is None
    s.compact()
    assert (s.committed, s.cursor) == (3, 3)


def test_expired_lease_is_redelivered_with_new_id_and_attempt():
    s = state()
    lease = s.lease_new(4, delivered=[0, 1, 2, 3], cursor_base=4, now=0, invisible_ms=1000)
    s.acked.add(1)
    assert s.expired_leases(999) == []
    assert s.expired_leases(1000) == [lease]
    again = s.redeliver(lease, 3, now=1000, invisible_ms=1000)
    assert again.lease_id != lease.lease_id and again.attempt == 2
    assert again.unsettled(s.acked) == [0, 2, 3]
    assert lease.lease_id not in s.leases


def test_partial_redelivery_splits_and_renames_the_rest():
    s = state()
    lease = s.lease_new(4, delivered=[0, 1, 2, 3], cursor_base=4, now=0, invisible_ms=10)
    taken = s.redeliver(lease, 2, now=100, invisible_ms=10)
    rest = [x for x in s.leases.values() if x.lease_id != taken.lease_id]
    assert (taken.start, taken.end) == (0, 2)
    assert len(rest) == 1 and (rest[0].start, rest[0].end, rest[0].attempt) == (2, 4, 1)
    assert rest[0].lease_id != lease.lease_id
    assert s.expired_leases(100) == rest


def test_change_invisible_moves_one_offset_to_its_own_lease():
    s = state()
    lease = s.lease_new(3, delivered=[0, 1, 2], cursor_base=3, now=0, invisible_ms=10)
    single = s.change_invisible(lease.lease_id, 1, deadline=5000)
    assert single is not None and (single.start, single.end, single.deadline) == (1, 2, 5000)
    assert s.expired_leases(100) == [s.leases[lease.lease_id]]
    assert s.leases[lease.lease_id].unsettled(s.acked) == [0, 2]
    assert s.change_invisible(lease.lease_id, 1, deadline=1) is None  # moved already
    assert s.change_invisible("nope", 0, deadline=1) is None


def test_inflight_counts_unsettled():
    s = state()
    s.lease_new(10, delivered=range(10), cursor_base=10, now=0, invisible_ms=10)
    s.acked.update({0, 5})
    assert s.inflight() == 8


def test_change_invisible_of_a_lone_message_keeps_its_lease():
    s = state()
    lease = s.lease_new(1, delivered=[0], cursor_base=1, now=0, invisible_ms=10)
    changed = s.change_invisible(lease.lease_id, 0, deadline=5000)
    assert changed is not None and changed.lease_id == lease.lease_id
    assert list(s.leases.values()) == [changed] and changed.deadline == 5000
