from cirrusmq_broker.rules.group_state import GroupQueueState, Lease, lease_slot, new_lease_id


def state() -> GroupQueueState:
    return GroupQueueState("g", "t", 0)


def ack(s: GroupQueueState, lease: Lease, *offsets: int) -> None:
    """What an ack does to the stored lease."""
    current = s.leases[lease.lease_id]
    s.leases[lease.lease_id] = Lease(
        current.lease_id,
        current.start,
        current.end,
        current.deadline,
        current.attempt,
        current.moved,
        current.acked | set(offsets),
    )


def test_lease_new_skips_filtered_offsets_and_commits_when_acked():
    s = state()
    lease = s.lease_new(5, delivered=[1, 3], cursor_base=5, now=0, invisible_ms=1000)
    assert lease is not None and (lease.start, lease.end, lease.attempt) == (0, 5, 1)
    assert lease.acked == {0, 2, 4}  # filtered out: settled inside the lease
    assert s.cursor == 5 and s.settled_offset() == 1  # 0 was filtered out
    ack(s, lease, 1)
    assert s.settled_offset() == 3
    ack(s, lease, 3)
    s.refresh()
    assert (s.committed, s.leases, s.open_leases, s.earliest_deadline) == (5, {}, 0, None)


def test_all_filtered_creates_no_lease():
    s = state()
    assert s.lease_new(3, delivered=[], cursor_base=3, now=0, invisible_ms=1000) is None
    s.refresh()
    assert (s.committed, s.cursor, s.touched) == (3, 3, {})


def test_expired_lease_is_redelivered_with_new_id_and_attempt():
    s = state()
    lease = s.lease_new(4, delivered=[0, 1, 2, 3], cursor_base=4, now=0, invisible_ms=1000)
    ack(s, lease, 1)
    assert s.expired_leases(999) == []
    assert [x.lease_id for x in s.expired_leases(1000)] == [lease.lease_id]
    again = s.redeliver(lease.lease_id, 3, now=1000, invisible_ms=1000)
    assert again.lease_id != lease.lease_id and again.attempt == 2
    assert again.unsettled() == [0, 2, 3]
    assert lease.lease_id not in s.leases
    assert again.slot == lease.slot  # stored in place of the old lease


def test_partial_redelivery_splits_and_renames_the_rest():
    s = state()
    lease = s.lease_new(4, delivered=[0, 1, 2, 3], cursor_base=4, now=0, invisible_ms=10)
    taken = s.redeliver(lease.lease_id, 2, now=100, invisible_ms=10)
    rest = [x for x in s.leases.values() if x.lease_id != taken.lease_id]
    assert (taken.start, taken.end) == (0, 2)
    assert len(rest) == 1 and (rest[0].start, rest[0].end, rest[0].attempt) == (2, 4, 1)
    assert rest[0].lease_id != lease.lease_id
    assert s.expired_leases(100) == rest
    assert set(s.touched) == {(0, False), (2, False)} and s.open_leases == 2


def test_change_invisible_moves_one_offset_to_its_own_lease():
    s = state()
    lease = s.lease_new(3, delivered=[0, 1, 2], cursor_base=3, now=0, invisible_ms=10)
    single = s.change_invisible(lease.lease_id, 1, deadline=5000)
    assert single is not None and (single.start, single.end, single.deadline) == (1, 2, 5000)
    assert single.slot == (1, True) and single.slot != lease.slot
    assert s.expired_leases(100) == [s.leases[lease.lease_id]]
    assert s.leases[lease.lease_id].unsettled() == [0, 2]
    assert s.change_invisible(lease.lease_id, 1, deadline=1) is None  # moved already
    assert s.change_invisible("nope", 0, deadline=1) is None


def test_inflight_counts_unsettled():
    s = state()
    lease = s.lease_new(10, delivered=range(10), cursor_base=10, now=0, invisible_ms=10)
    ack(s, lease, 0, 5)
    assert s.inflight() == 8


def test_change_invisible_of_a_lone_message_keeps_its_lease():
    s = state()
    lease = s.lease_new(1, delivered=[0], cursor_base=1, now=0, invisible_ms=10)
    changed = s.change_invisible(lease.lease_id, 0, deadline=5000)
    assert changed is not None and changed.lease_id == lease.lease_id
    assert list(s.leases.values()) == [changed] and changed.deadline == 5000


def test_bounds_stay_safe_until_the_leases_are_loaded():
    """Without the leases, committed only lags and the deadline bound only runs early."""
    s = GroupQueueState(
        "g", "t", 0, committed=4, cursor=10, earliest_deadline=500, open_leases=3, version=7
    )
    assert not s.complete
    s.lease_new(12, delivered=[10, 11], cursor_base=12, now=0, invisible_ms=100)
    s.refresh()
    assert (s.committed, s.earliest_deadline, s.open_leases) == (4, 100, 4)
    assert s.may_have_expired(100) and not s.may_have_expired(99)


def test_lease_ids_name_their_slot():
    assert lease_slot(new_lease_id((42, False), 3)) == (42, False)
    assert lease_slot(new_lease_id((7, True), 1)) == (7, True)
    assert lease_slot("0123456789abcdef") is None  # not a lease id this broker made
    assert lease_slot("x.1") is None


def test_a_lease_id_with_unicode_digits_names_no_slot():
    from cirrusmq_broker.rules.group_state import lease_slot

    assert lease_slot("12.abc") == (12, False)
    assert lease_slot("\u00b2.abc") is None and lease_slot("\u00b2m.abc") is None


def test_fifo_held_offsets_hold_the_committed_offset_until_a_lease_takes_them():
    s = state()
    a = frozenset({"a"})
    first = s.lease_new(2, delivered=[0], cursor_base=2, now=0, invisible_ms=10, groups=a)
    assert first is not None and (first.start, first.end) == (0, 1)
    s.lease_new(4, delivered=[3], cursor_base=4, now=0, invisible_ms=10, hold=[1, 2],
                groups=frozenset({"b"}))  # fmt: skip
    assert s.held == {1, 2} and s.held_groups() == {"a", "b"}
    ack(s, first, 0)
    s.refresh()
    assert s.committed == 1  # 1 and 2 wait for their group: not settled
    taken = s.lease_new(4, delivered=[1, 2], cursor_base=4, now=0, invisible_ms=10, groups=a)
    assert taken is not None and (taken.start, taken.end, taken.acked) == (1, 3, frozenset())
    assert s.held == frozenset() and s.cursor == 4


def test_fifo_gate_redelivers_an_expired_lease_only_when_no_other_lease_holds_its_groups():
    from dataclasses import replace

    from cirrusmq_broker.rules import orderly

    s = state()
    a, b = frozenset({"a"}), frozenset({"b"})
    old = s.lease_new(2, delivered=[0, 1], cursor_base=2, now=0, invisible_ms=10, groups=a)
    s.lease_new(3, delivered=[2], cursor_base=3, now=0, invisible_ms=100, groups=b)
    assert orderly.gate(s, 50) == ([old], a | b)  # a's lease expired, b's in flight
    s.redeliver(old.lease_id, 1, now=50, invisible_ms=100)  # 0 again; 1 stays expired
    again, held = orderly.gate(s, 60)
    assert again == [] and held == a | b  # 1 waits behind 0 of its group
    legacy = s.leases[next(iter(s.leases))]
    s.leases[legacy.lease_id] = replace(legacy, groups=None)
    assert orderly.gate(s, 60)[1] is None  # a lease without groups holds every group
