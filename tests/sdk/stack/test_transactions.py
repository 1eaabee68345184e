"""TransactionProducer through the local stack: real HTTP, moto server, the checker function."""

from __future__ import annotations

import base64
import time

import httpx
import pytest
from cirrusmq import (
    BadRequestError,
    Message,
    ProducerFencedError,
    SimpleConsumer,
    TransactionAdmin,
    TransactionEndedError,
    TransactionProducer,
    TransactionResolution,
)

from ..helpers import wait_until
from .conftest import unique

FAST = {"check_immunity_seconds": 1, "check_interval_seconds": 2, "max_checks": 3}


def drain(endpoint, credentials, topic) -> list[bytes]:
    """Every message a new group can receive from ``topic`` (bodies, sorted)."""
    got = []
    with SimpleConsumer(endpoint, credentials, unique("g"), [topic], await_duration=0) as c:
        while batch := c.receive(100, 30):
            got += [m.body for m in batch]
            c.ack_batch(batch)
    return sorted(got)


def raw_topic_keys(stack, topic) -> list[str]:
    s3 = stack.boto3_client("s3")
    listed = s3.list_objects_v2(
        Bucket=stack.resources["MessageBucket"], Prefix=f"topics/topic={topic}/"
    )
    return [o["Key"] for o in listed.get("Contents", [])]


def run_checker(stack) -> dict:
    return stack.invoke("TxnCheckerFunction", {"task": "check", "loop_seconds": 0})


def check_until(stack, answered, *, seconds: float = 2, rounds: int = 4) -> None:
    """Move time on and run the checker until ``answered()``: a check handed to a producer
    that died (its long poll was still in flight) is asked again one interval later."""
    for _ in range(rounds):
        stack.advance_time(seconds)
        run_checker(stack)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if answered():
                return
            time.sleep(0.05)
    raise AssertionError("no producer answered the check")


@pytest.fixture
def txn_topic(make_topic) -> str:
    return make_topic("pay", message_type="TRANSACTION", queues=2)


def test_commit_is_visible_once_and_rollback_never(
    endpoint, credentials, txn_topic, cirrusmq_stack
):
    group = unique("pg")
    with TransactionProducer(endpoint, credentials, producer_group=group, **FAST) as producer:
        with producer.begin_transaction() as tx:
            tx.send(Message(txn_topic, b"one"))
            tx.send_batch([Message(txn_topic, b"two"), Message(txn_topic, b"three")])
            assert drain(endpoint, credentials, txn_topic) == []  # half: invisible
        assert tx.state == "COMMITTED"
        tx.commit()  # again: a no-op
        with pytest.raises(TransactionEndedError):
            tx.rollback()

        with pytest.raises(RuntimeError), producer.begin_transaction() as doomed:
            doomed.send(Message(txn_topic, b"never"))
            raise RuntimeError("the local transaction failed")
        assert doomed.state == "ROLLED_BACK"
    assert drain(endpoint, credentials, txn_topic) == [b"one", b"three", b"two"]
    keys = raw_topic_keys(cirrusmq_stack, txn_topic)
    assert len(keys) <= 2 and all("/txn-" in k for k in keys)  # one object per queue


def test_a_killed_producer_is_checked_and_the_checker_commits(
    endpoint, credentials, txn_topic, cirrusmq_stack
):
    group = unique("pg")
    asked = []

    def checker(view):
        asked.append((view.transaction_id, view.body, view.message_count))
        return TransactionResolution.COMMIT

    dying = TransactionProducer(
        endpoint, credentials, producer_group=group, **{**FAST, "max_checks": 10}
    )
    tx = dying.begin_transaction()
    tx.send(Message(txn_topic, b"paid", keys=("order-7",)))
    tx.send(Message(txn_topic, b"shipped"))
    dying.close()  # killed before its verdict
    with TransactionProducer(
        endpoint, credentials, producer_group=group, checker=checker, poll_wait_s=2
    ) as survivor:
        check_until(cirrusmq_stack, lambda: survivor.checks_answered == 1)
    assert asked[-1] == (tx.id, b"paid", 2)
    assert drain(endpoint, credentials, txn_topic) == [b"paid", b"shipped"]


def test_unknown_answers_until_max_checks_roll_back(
    endpoint, credentials, txn_topic, cirrusmq_stack
):
    group = unique("pg")
    with TransactionProducer(
        endpoint,
        credentials,
        producer_group=group,
        checker=lambda view: TransactionResolution.UNKNOWN,
        poll_wait_s=2,
        **FAST,
    ) as producer:
        tx = producer.begin_transaction()
        tx.send(Message(txn_topic, b"undecided"))
        for answered in range(1, 4):
            cirrusmq_stack.advance_time(2)
            assert run_checker(cirrusmq_stack)["asked"] >= 1  # (other tests' too)
            wait_until(lambda n=answered: producer.checks_answered >= n, timeout_s=15)
        cirrusmq_stack.advance_time(2)
        assert run_checker(cirrusmq_stack)["rolled_back"] >= 1
    with TransactionAdmin(endpoint, credentials) as admin:
        ended = admin.describe(group, tx.id)
        assert ended.state == "ROLLED_BACK" and ended.end_reason == "no verdict after 3 checks"
        assert admin.list_open(group) == []
    assert drain(endpoint, credentials, txn_topic) == []
    assert raw_topic_keys(cirrusmq_stack, txn_topic) == []


def test_a_newer_instance_fences_the_older_one(endpoint, credentials, txn_topic):
    group = unique("pg")
    with TransactionProducer(
        endpoint, credentials, producer_group=group, transactional_id="orders-1"
    ) as old:
        tx = old.begin_transaction()
        tx.send(Message(txn_topic, b"zombie"))
        with TransactionProducer(
            endpoint, credentials, producer_group=group, transactional_id="orders-1"
        ) as new:
            assert new.epoch == old.epoch + 1
            with pytest.raises(ProducerFencedError) as info:
                tx.commit()
            assert info.value.current_epoch == new.epoch and old.fenced
            with pytest.raises(ProducerFencedError):
                old.begin_transaction().send(Message(txn_topic, b"no more"))
            with new.begin_transaction() as fresh:
                fresh.send(Message(txn_topic, b"from the new one"))
    with TransactionAdmin(endpoint, credentials) as admin:  # the zombie's: by hand
        assert admin.resolve(group, tx.id, TransactionResolution.ROLLBACK)
    assert drain(endpoint, credentials, txn_topic) == [b"from the new one"]


def test_operators_list_and_end_by_hand(endpoint, credentials, txn_topic):
    group = unique("pg")
    with TransactionProducer(endpoint, credentials, producer_group=group) as producer:
        tx = producer.begin_transaction()
        tx.send_batch([Message(txn_topic, b"a"), Message(txn_topic, b"b")])
        with TransactionAdmin(endpoint, credentials) as admin:
            [listed] = admin.list_open(group)
            assert (listed.transaction_id, listed.topic, listed.message_count) == (
                tx.id,
                txn_topic,
                2,
            )
            assert listed.checks == 0 and listed.age_seconds >= 0 and listed.state == "OPEN"
            assert admin.resolve(group, tx.id, TransactionResolution.COMMIT) is True
            assert admin.resolve(group, tx.id, TransactionResolution.COMMIT) is False
            with pytest.raises(TransactionEndedError):
                admin.resolve(group, tx.id, TransactionResolution.ROLLBACK)
            assert admin.list_open(group) == []
    assert drain(endpoint, credentials, txn_topic) == [b"a", b"b"]


def test_bad_input_is_4xx_and_stores_nothing(
    endpoint, credentials, txn_topic, make_topic, cirrusmq_stack
):
    from cirrusmq import Producer

    with Producer(endpoint, credentials) as plain, pytest.raises(BadRequestError) as info:
        plain.send(Message(txn_topic, b"no transaction"))
    assert info.value.code == "TransactionRequired"
    normal = make_topic("normal")
    group = unique("pg")
    with TransactionProducer(endpoint, credentials, producer_group=group) as producer:
        with pytest.raises(BadRequestError) as info:
            producer.begin_transaction().send(Message(normal, b"x"))
        assert info.value.code == "NotTransactional"
    with httpx.Client(base_url=endpoint, auth=_auth(credentials)) as http:
        path = f"/v1/producer-groups/{group}/transactions/t1/messages"
        body = {"topic": txn_topic, "transactional_id": "x", "epoch": 1, "messages": []}
        for bad in (
            body,
            {**body, "messages": [{"body": "!!not base64"}]},
            {**body, "epoch": 0, "messages": [{"body": base64.b64encode(b"x").decode()}]},
            {**body, "part": 50, "messages": [{"body": base64.b64encode(b"x").decode()}]},
        ):
            response = http.post(path, json=bad)
            assert 400 <= response.status_code < 500, response.text
        response = http.post(
            "/v1/producer-groups/bad.group/producers", json={"transactional_id": "a"}
        )
        assert response.status_code == 400
    assert raw_topic_keys(cirrusmq_stack, txn_topic) == []
    s3 = cirrusmq_stack.boto3_client("s3")
    listed = s3.list_objects_v2(Bucket=cirrusmq_stack.resources["MessageBucket"], Prefix="half/")
    assert not [o for o in listed.get("Contents", []) if f"/{group}/" in o["Key"]]


def _auth(credentials):
    """Signs on the stack's clock (an earlier test's advance_time may have moved it ahead)."""
    from cirrusmq import CirrusAuth
    from cirrusmq_broker import clock

    auth = CirrusAuth(credentials)
    auth.clock_offset_s = clock.offset_ms() / 1000
    return auth


def test_cli_lists_and_ends_transactions(endpoint, credentials, txn_topic, monkeypatch, tmp_path):
    import json

    from cirrusmq.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    runner = CliRunner(env={"COLUMNS": "80"})

    def cli(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    group = unique("pg")
    with TransactionProducer(endpoint, credentials, producer_group=group) as producer:
        keep, drop = producer.begin_transaction(), producer.begin_transaction()
        keep.send(Message(txn_topic, b"kept"))
        drop.send(Message(txn_topic, b"dropped"))
    listed = json.loads(cli("txn", "list", group, "--json"))
    assert sorted(t["transaction_id"] for t in listed) == sorted([keep.id, drop.id])
    assert all(t["topic"] == txn_topic and t["checks"] == 0 for t in listed)
    table = cli("txn", "list", group)
    assert "2 open transaction(s)" in table
    assert keep.id in table and drop.id in table  # whole at 80 columns (the runner's width)
    assert f"committed transaction {keep.id}" in cli("txn", "commit", group, keep.id)
    cli("txn", "rollback", group, drop.id, code=1)  # asks first; no answer is no
    assert f"rolled back transaction {drop.id}" in cli("txn", "rollback", group, drop.id, "-y")
    assert "TransactionAlreadyEnded" in cli("txn", "rollback", group, keep.id, "--yes", code=1)
    assert json.loads(cli("txn", "list", group, "--json")) == []
    assert drain(endpoint, credentials, txn_topic) == [b"kept"]
