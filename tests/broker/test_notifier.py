"""The notifier: only waiting connections are told, once; gone connections are removed; one
Query per touched topic per stream batch, never per message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from cirrusmq_broker.rules.permissions import Permissions
from cirrusmq_broker.services.notifications import Notifier, touched_topics
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.clients import aws_client, observe_calls
from cirrusmq_broker.storage.connections import ConnectionStore
from cirrusmq_local.in_process import broker_settings

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


class Interrupted(BaseException):
    """The function's run ends here (its timeout): nothing after it runs."""


class FakePoster:
    """Records posts; connections in ``gone`` answer 410, those in ``failing`` fail (a 429 or
    5xx after the client's retries); ``during_post`` runs while a post is in flight."""

    def __init__(
        self,
        gone: set[str] | None = None,
        failing: set[str] | None = None,
        during_post: Any = None,
    ) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.gone = gone or set()
        self.failing = failing or set()
        self.during_post = during_post
        self.closed: list[str] = []

    def close(self, connection_id: str) -> bool:
        self.closed.append(connection_id)
        return True

    def post(self, connection_id: str, data: bytes) -> bool:
        if self.during_post is not None:
            self.during_post(connection_id)
        if connection_id in self.gone:
            return False
        if connection_id in self.failing:
            raise ConnectionError(f"post to {connection_id} throttled")
        self.posts.append((connection_id, json.loads(data)))
        return True


def head_record(
    topic: str, queue: int, old: int | None, new: int, sequence: str = "1"
) -> dict[str, Any]:
    image = {"stream": {"S": f"{topic}#{queue}"}, "next_offset": {"N": str(new)}}
    change: dict[str, Any] = {
        "Keys": {"stream": {"S": f"{topic}#{queue}"}},
        "NewImage": image,
        "SequenceNumber": sequence,
    }
    if old is not None:
        change["OldImage"] = {**image, "next_offset": {"N": str(old)}}
    return {"eventName": "MODIFY" if old is not None else "INSERT", "dynamodb": change}


@pytest.fixture
def settings(aws: None) -> Settings:
    """The broker's settings with the notification channel's table."""
    return broker_settings(TEMPLATE, tables={"connections_table": "ConnectionsTable"})


@pytest.fixture
def store(aws: None) -> ConnectionStore:
    settings = broker_settings(TEMPLATE)
    names = boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"]
    table = next(t for t in names if "Connections" in t)
    return ConnectionStore(aws_client("dynamodb", settings), table)


KEY = "CMQKEY"
"""The access key of the waiters these tests store: active (:class:`ActiveKeys`)."""


class ActiveKeys:
    """Every key is active with every permission."""

    def permissions_of(self, access_key: str) -> Permissions | None:
        return Permissions.from_json({"admin": True})


def notifier(store: ConnectionStore, poster: FakePoster, clock: Any) -> Notifier:
    return Notifier(
        connections=store,
        poster=poster,  # type: ignore[arg-type]
        clock=clock,
        auth=ActiveKeys(),
    )


def test_only_waiting_connections_are_told_and_only_once(store, clock) -> None:
    now_s = clock() // 1000
    store.put_waiters(
        "c1", "billing", ["orders", "refunds"], access_key=KEY, expires_at=now_s + 600
    )
    store.put_waiters("c2", "audit", ["refunds"], access_key=KEY, expires_at=now_s + 600)
    poster = FakePoster()
    fan_out = notifier(store, poster, clock).on_records([head_record("orders", 0, 3, 4)])
    assert fan_out.notified == 1
    assert poster.posts == [
        ("c1", {"type": "look_now", "waits": [{"group": "billing", "topics": ["orders"]}]})
    ]
    # told once: c1 no longer waits on orders (it registers again when idle again)
    notifier(store, poster, clock).on_records([head_record("orders", 1, 0, 1)])
    assert len(poster.posts) == 1
    assert {w.connection_id for w in store.waiters("refunds", now_s=now_s)} == {"c1", "c2"}


def test_a_gone_connection_is_deleted(store, clock) -> None:
    now_s = clock() // 1000
    store.put_connection("gone", "key", expires_at=now_s + 600)
    store.put_waiters("gone", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    store.put_waiters("alive", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    poster = FakePoster(gone={"gone"})
    fan_out = notifier(store, poster, clock).on_records([head_record("orders", 0, 0, 1)])
    assert (fan_out.notified, fan_out.gone) == (1, 1)
    assert store.access_key_of("gone") is None
    assert store.waiters("orders", now_s=now_s) == []


def test_expired_waiters_are_not_told(store, clock) -> None:
    now_s = clock() // 1000
    store.put_waiters("old", "billing", ["orders"], access_key=KEY, expires_at=now_s - 1)
    poster = FakePoster()
    notifier(store, poster, clock).on_records([head_record("orders", 0, 0, 1)])
    assert poster.posts == []


def notified_counting_calls(store, clock, records: list) -> tuple[list[str], FakePoster]:
    """Run the notifier on ``records``: the AWS operations it called, and its poster."""
    calls: list[str] = []
    remove = observe_calls(lambda service, op, _: calls.append(op))
    try:
        poster = FakePoster()
        notifier(store, poster, clock).on_records(records)
    finally:
        remove()
    return calls, poster


def test_one_query_per_touched_topic_not_per_message(store, clock) -> None:
    now_s = clock() // 1000
    for i in range(30):
        store.put_waiters(f"c{i}", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    records = [head_record("orders", q, n, n + 1) for q in range(8) for n in range(20)]
    records += [head_record("refunds", 0, n, n + 1) for n in range(50)]
    calls, poster = notified_counting_calls(store, clock, records)
    assert calls.count("Query") == 2  # orders and refunds, for 210 appends
    assert len(poster.posts) == 30  # one post per connection


def test_only_moved_heads_count_as_appends() -> None:
    records = [
        head_record("orders", 0, 5, 6),
        head_record("closed", 0, 5, 5),  # closed or reopened: the offset did not move
        {
            "eventName": "MODIFY",
            "dynamodb": {
                "Keys": {"stream": {"S": "orders#0#sweep"}},
                "NewImage": {"next_offset": {"N": "1"}},
            },
        },
    ]
    assert touched_topics(records) == {"orders"}


def test_a_retry_topic_append_tells_its_groups_waiters_on_the_topic(store, clock) -> None:
    """A nack (or a lease's expiry) appends to ``retry.<group>.<topic>``: nobody waits on
    that name, the group's consumers wait on the topic. They are told (and learn from their
    receive when the retry is due); other groups of the topic are not."""
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    store.put_waiters("c2", "audit", ["orders"], access_key=KEY, expires_at=now_s + 600)
    poster = FakePoster()
    notifier(store, poster, clock).on_records([head_record("retry.billing.orders", 0, 3, 4)])
    assert poster.posts == [
        ("c1", {"type": "look_now", "waits": [{"group": "billing", "topics": ["orders"]}]})
    ]
    assert {w.connection_id for w in store.waiters("orders", now_s=now_s)} == {"c2"}


def test_one_query_per_topic_also_with_its_retry_topics(store, clock) -> None:
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    store.put_waiters("c2", "audit", ["orders"], access_key=KEY, expires_at=now_s + 600)
    records = [head_record("orders", 0, 1, 2), head_record("retry.billing.orders", 0, 0, 1)]
    calls, poster = notified_counting_calls(store, clock, records)
    assert calls.count("Query") == 1
    assert sorted(c for c, _ in poster.posts) == ["c1", "c2"]


def test_an_append_to_a_topic_nobody_can_wait_on_costs_no_query(store, clock) -> None:
    """A dead letter appends to ``dlq.<group>``: a waiter's topic has no dot (registration
    checks the name), so no waiter can be found there and no Query is made for it."""
    calls, poster = notified_counting_calls(store, clock, [head_record("dlq.billing", 0, 0, 1)])
    assert calls.count("Query") == 0
    assert poster.posts == []


def test_a_failed_post_keeps_the_waiter_for_the_next_append(store, clock) -> None:
    """A post that fails (429 / 5xx after the client's retries) does not make the connection
    deaf: it still waits, and the next append tells it."""
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    notifier(store, FakePoster(failing={"c1"}), clock).on_records([head_record("orders", 0, 0, 1)])
    assert [w.connection_id for w in store.waiters("orders", now_s=now_s)] == ["c1"]
    poster = FakePoster()
    notifier(store, poster, clock).on_records([head_record("orders", 0, 1, 2)])
    assert [c for c, _ in poster.posts] == ["c1"]


def test_a_failed_post_reports_the_records_of_its_topics_for_a_retry(store, clock) -> None:
    """The stream batch's records whose waiters a post failed to tell are reported as failed
    items (Lambda retries from the earliest one, up to the mapping's retry limit); the
    records whose waiters were told are not."""
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)
    store.put_waiters("c2", "billing", ["refunds"], access_key=KEY, expires_at=now_s + 600)
    records = [
        head_record("refunds", 0, 0, 1, sequence="100"),
        head_record("orders", 0, 0, 1, sequence="200"),
        head_record("retry.billing.orders", 0, 0, 1, sequence="300"),
    ]
    fan_out = notifier(store, FakePoster(failing={"c1"}), clock).on_records(records)
    assert fan_out.failed_records == ["200", "300"]
    assert fan_out.notified == 1


def test_a_registration_renewed_while_its_post_is_in_flight_stays(store, clock) -> None:
    """The told consumer may go idle and register again before the notifier is done with
    its post: that new registration is not removed with the one the notifier told."""
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)

    def register_again(connection_id: str) -> None:
        store.put_waiters(
            connection_id, "billing", ["orders"], access_key=KEY, expires_at=now_s + 600
        )

    poster = FakePoster(during_post=register_again)
    notifier(store, poster, clock).on_records([head_record("orders", 0, 0, 1)])
    assert [c for c, _ in poster.posts] == ["c1"]
    assert [w.connection_id for w in store.waiters("orders", now_s=now_s)] == ["c1"]


def test_a_run_cut_short_leaves_the_waiters_it_did_not_tell(store, clock) -> None:
    """The function times out before its posts are made: Lambda runs the batch again, and
    the waiters are still there to be told."""
    now_s = clock() // 1000
    store.put_waiters("c1", "billing", ["orders"], access_key=KEY, expires_at=now_s + 600)

    def time_out(connection_id: str) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):
        notifier(store, FakePoster(during_post=time_out), clock).on_records(
            [head_record("orders", 0, 0, 1)]
        )
    poster = FakePoster()
    notifier(store, poster, clock).on_records([head_record("orders", 0, 0, 1)])
    assert [c for c, _ in poster.posts] == ["c1"]


def test_the_waiters_are_read_consistently(store, clock) -> None:
    """A registration confirmed just before an append is found by the append's Query."""
    queries: list[dict] = []
    remove = observe_calls(lambda service, op, params: op == "Query" and queries.append(params))
    try:
        notifier(store, FakePoster(), clock).on_records([head_record("orders", 0, 0, 1)])
    finally:
        remove()
    assert queries and all(q.get("ConsistentRead") is True for q in queries)


def test_the_stream_mapping_retries_only_the_reported_records_a_bounded_number_of_times() -> None:
    from cirrusmq_local.cfn_yaml import load_yaml

    function = load_yaml(TEMPLATE)["Resources"]["NotifyFunction"]["Properties"]
    mapping = function["Events"]["HeadsMoved"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 0 < mapping["MaximumRetryAttempts"] <= 3


def test_a_waiter_whose_key_was_disabled_is_closed_not_told(broker, clock) -> None:
    """A wait registered before its key was disabled: the connection is closed
    (DeleteConnection) and forgotten, no "look now" goes to it, and the next wait it sends
    is refused."""
    from cirrusmq_broker.errors import InvalidSignature
    from cirrusmq_broker.services.notifications import ChannelService

    grant = Permissions.from_json({"subscribe": [{"groups": ["billing"], "topics": ["orders"]}]})
    key, _ = broker.access_keys.create(grant, "to be disabled")
    store = broker._connections
    store.put_connection("c1", key.access_key, expires_at=clock() // 1000 + 600)
    channel = ChannelService(auth=broker.auth, connections=store, clock=clock)
    wait = {"action": "wait", "group": "billing", "topics": ["orders"]}
    channel.wait("c1", wait)
    broker.access_keys.set_enabled(key.access_key, False, caller="admin")
    clock.advance(61)  # past every function's key cache
    poster = FakePoster()
    Notifier(connections=store, poster=poster, clock=clock, auth=broker.auth).on_records(
        [head_record("orders", 0, 0, 1)]
    )
    assert poster.posts == []
    assert poster.closed == ["c1"]
    assert store.access_key_of("c1") is None
    assert store.waiters("orders", now_s=clock() // 1000) == []
    with pytest.raises(InvalidSignature):
        channel.wait("c1", wait)


class NarrowedKey:
    """The waiters' key is active, but its permissions now let it consume only ``refunds``
    as ``billing`` (an admin narrowed them after the waits were registered)."""

    def permissions_of(self, access_key: str) -> Permissions | None:
        return Permissions.from_json(
            {"subscribe": [{"groups": ["billing"], "topics": ["refunds"]}]}
        )


def test_a_key_no_longer_allowed_to_consume_a_topic_is_not_told_of_it(store, clock) -> None:
    """A wait is checked against the key's permissions when it is registered; a key whose
    permissions lost the topic since is told nothing more of it (it may not receive from
    it), and that waiter goes, while the topics it may still consume are told."""
    now_s = clock() // 1000
    store.put_waiters(
        "c1", "billing", ["orders", "refunds"], access_key=KEY, expires_at=now_s + 600
    )
    poster = FakePoster()
    narrowed = Notifier(
        connections=store,
        poster=poster,  # type: ignore[arg-type]
        clock=clock,
        auth=NarrowedKey(),
    )
    narrowed.on_records([head_record("orders", 0, 0, 1)])
    assert poster.posts == []
    assert store.waiters("orders", now_s=now_s) == []
    narrowed.on_records([head_record("refunds", 0, 0, 1)])
    assert poster.posts == [
        ("c1", {"type": "look_now", "waits": [{"group": "billing", "topics": ["refunds"]}]})
    ]
