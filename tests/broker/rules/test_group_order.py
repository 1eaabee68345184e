"""FIFO message groups held one by one (SQS): one lease per group of a receive, a group's
visible prefix redelivered up to its first message in flight, whole groups in the order
they became visible."""

from cirrusmq_broker.model import StoredMessage
from cirrusmq_broker.rules.group_order import GroupRun, runs_of, visible_order
from cirrusmq_broker.rules.group_state import GroupQueueState
from cirrusmq_broker.rules.orderly import gate, gate_by_group


def message(offset: int, group: str | None, stored: int = 0, queue: int = 0) -> StoredMessage:
    return StoredMessage(
        "t", queue, offset, f"m{offset}", b"", None, (), {}, group, stored, stored or offset
    )


def leased(*deliveries: tuple[str, list[int]], invisible_ms: int = 1000) -> GroupQueueState:
    """A queue whose offsets 0..n were handed out in one receive, one lease per group."""
    s = GroupQueueState("g", "t", 0)
    end = max(o for _, offsets in deliveries for o in offsets) + 1
    s.lease_groups(
        end,
        deliveries=[(frozenset([g]), offsets) for g, offsets in deliveries],
        cursor_base=end,
        now=0,
        invisible_ms=invisible_ms,
    )
    return s


def test_one_receive_of_two_groups_leases_each_group_on_its_own():
    s = leased(("a", [0, 2]), ("b", [1, 3]))
    by_group = {next(iter(lease.groups)): lease for lease in s.leases.values()}
    assert by_group["a"].unsettled() == [0, 2] and by_group["b"].unsettled() == [1, 3]
    assert s.cursor == 4 and s.open_leases == 2


def test_a_group_is_visible_up_to_its_first_message_in_flight():
    s = leased(("a", [0, 1, 2]))
    (lease,) = s.leases.values()
    s.change_invisible(lease.lease_id, 1, deadline=5000)  # a-1 alone, later
    again, held = gate_by_group(s, 2000, 10)
    assert [(x.unsettled(), n) for x, n in again] == [([0, 2], 1)]  # a-0 only: a-1 in flight
    assert held == {"a"}  # a-2 and anything after it waits
    assert gate(s, 2000)[0] == []  # the orderly rule: the live message holds the group


def test_the_budget_cuts_a_group_and_holds_the_rest_of_it():
    s = leased(("a", [0, 1, 2]), ("b", [3]))
    again, held = gate_by_group(s, 1000, 2)
    counts = {next(iter(x.groups)): n for x, n in again}
    assert counts == {"a": 2, "b": 1} and held == {"a"}


def test_a_lease_of_several_groups_is_judged_whole():
    s = GroupQueueState("g", "t", 0)
    s.lease_new(2, delivered=[0, 1], cursor_base=2, now=0, invisible_ms=1000,
                groups=frozenset({"a", "b"}))  # fmt: skip
    assert gate_by_group(s, 500, 10) == ([], frozenset({"a", "b"}))
    again, held = gate_by_group(s, 1000, 10)
    assert [n for _, n in again] == [2] and held == {"a", "b"}


def test_runs_are_per_group_in_offset_order():
    runs = runs_of(
        0,
        again=[(900, [message(0, "a"), message(2, "a")])],
        new=[message(1, "b", stored=10), message(3, "a", stored=30)],
    )
    assert sorted((r.visible_since, [m.offset for m in r.messages]) for r in runs) == [
        (10, [1]),
        (900, [0, 2, 3]),
    ]


def test_whole_groups_go_first_the_one_visible_longest_first_across_queues():
    runs = [
        GroupRun(0, 500, [message(0, "a"), message(1, "a")]),
        GroupRun(3, 100, [message(7, "c", queue=3)]),
        GroupRun(2, 300, [message(4, "b", queue=2), message(5, "b", queue=2)]),
    ]
    assert [m.offset for m in visible_order(runs, 4)] == [7, 4, 5, 0]
