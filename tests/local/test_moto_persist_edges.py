"""Edges of the moto server's data dir (:mod:`cirrusmq_local.moto_persist`): what a restart
must bring back, or refuse clearly, beyond the ordinary stop and ``kill -9``."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from cirrusmq_local.moto import DUMMY_CREDENTIALS, REGION, MotoServer
from cirrusmq_local.moto_persist import JOURNAL, SNAPSHOT, DataStore


def _client(server: MotoServer, service: str, **extra: Any) -> Any:
    return boto3.client(
        service, endpoint_url=server.url, region_name=REGION, **DUMMY_CREDENTIALS, **extra
    )


def _kill_9(server: MotoServer) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    server.stop()


def _no_app(*_: Any) -> Any:
    raise AssertionError("nothing to replay")


def _store_with_records(directory: Path, count: int) -> None:
    """A data dir whose journal holds ``count`` TTL deletions (of tables that do not exist)."""
    store = DataStore(directory)
    store.restore(_no_app)
    for index in range(count):
        entry = {"kind": "ttl", "account": "123456789012", "region": REGION}
        store.record({**entry, "table": f"absent-{index}", "hash": "h", "range": None})
    store.close()
    store._lock_file.close()


def test_a_journal_tail_of_zero_bytes_is_cut_off(tmp_path: Path) -> None:
    """A file system may show an append cut short by a crash as zeros."""
    with MotoServer(data_dir=tmp_path) as server:
        s3 = _client(server, "s3")
        s3.create_bucket(Bucket="kept-bucket")
        s3.put_object(Bucket="kept-bucket", Key="k", Body=b"body")
        _kill_9(server)
    with (tmp_path / JOURNAL).open("ab") as journal:
        journal.write(b"\x00" * 16)
    with MotoServer(data_dir=tmp_path) as server:
        assert _client(server, "s3").get_object(Bucket="kept-bucket", Key="k")["Body"].read() == (
            b"body"
        )


def test_an_unsigned_s3_put_is_kept(tmp_path: Path) -> None:
    """moto answers an anonymous PutObject: the answer means it is stored."""
    with MotoServer(data_dir=tmp_path) as server:
        _client(server, "s3").create_bucket(Bucket="kept-bucket")
        anonymous = _client(server, "s3", config=Config(signature_version=UNSIGNED))
        anonymous.put_object(Bucket="kept-bucket", Key="anonymous", Body=b"body")
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        body = _client(server, "s3").get_object(Bucket="kept-bucket", Key="anonymous")["Body"]
        assert body.read() == b"body"


def test_a_sigv2_s3_put_is_kept(tmp_path: Path) -> None:
    with MotoServer(data_dir=tmp_path) as server:
        _client(server, "s3").create_bucket(Bucket="kept-bucket")
        v2 = _client(server, "s3", config=Config(signature_version="s3"))
        v2.put_object(Bucket="kept-bucket", Key="v2", Body=b"body")
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        body = _client(server, "s3").get_object(Bucket="kept-bucket", Key="v2")["Body"]
        assert body.read() == b"body"


@pytest.mark.xfail(
    strict=True,
    reason="a versioned bucket's version ids are drawn at random and the replay draws new "
    "ones: the journal would have to keep each answer's x-amz-version-id (puts, copies, "
    "completions, delete markers) and rename the replayed versions",
)
def test_object_version_ids_survive_a_restart(tmp_path: Path) -> None:
    with MotoServer(data_dir=tmp_path) as server:
        s3 = _client(server, "s3")
        s3.create_bucket(Bucket="kept-bucket")
        s3.put_bucket_versioning(
            Bucket="kept-bucket", VersioningConfiguration={"Status": "Enabled"}
        )
        first = s3.put_object(Bucket="kept-bucket", Key="k", Body=b"one")["VersionId"]
        s3.put_object(Bucket="kept-bucket", Key="k", Body=b"two")
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        s3 = _client(server, "s3")
        body = s3.get_object(Bucket="kept-bucket", Key="k", VersionId=first)["Body"]
        assert body.read() == b"one"


def test_a_corrupt_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / SNAPSHOT).write_bytes(b"not a snapshot")
    store = DataStore(tmp_path)
    with pytest.raises(RuntimeError, match=SNAPSHOT):
        store.restore(_no_app)


def test_a_damaged_record_before_good_ones_keeps_the_journal_aside(tmp_path: Path) -> None:
    """A bad record with good ones after it is a crash's unsynced appends (nothing after it
    was answered: an answer fsyncs every record before it) or damage to the disk (then
    what follows was acknowledged). The replay stops there either way, but the journal is
    kept aside, not emptied, so no acknowledged write is dropped without a trace."""
    _store_with_records(tmp_path, 3)
    data = bytearray((tmp_path / JOURNAL).read_bytes())
    data[12] ^= 0xFF  # inside the first record's body
    (tmp_path / JOURNAL).write_bytes(bytes(data))
    store = DataStore(tmp_path)
    store.restore(_no_app)
    kept = list(tmp_path.glob(f"{JOURNAL}.damaged*"))
    assert [path.read_bytes() for path in kept] == [bytes(data)]


def _request(path: str) -> dict[str, Any]:
    return {"kind": "request", "m": "POST", "p": path, "h": {"PATH_INFO": path}, "b": b""}


def test_a_crash_between_snapshot_and_emptied_journal_replays_nothing_twice(
    tmp_path: Path,
) -> None:
    calls: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b""]

    store = DataStore(tmp_path)
    store.restore(_no_app)
    for name in ("a", "b"):
        store.record(_request(f"/{name}"))
    store._write_snapshot()  # the compaction's first half; the crash comes before the second
    store.record(_request("/c"))
    store.close()
    store._lock_file.close()
    again = DataStore(tmp_path)
    again.restore(app)
    assert calls == ["/c"]


def test_a_refused_batch_write_reads_the_same_after_a_restart(tmp_path: Path) -> None:
    """moto stores a BatchWriteItem's puts up to the item it refuses (ValidationException):
    what was read before a restart must read the same after it."""
    with MotoServer(data_dir=tmp_path) as server:
        ddb = _client(server, "dynamodb")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        puts = [{"PutRequest": {"Item": item}} for item in ({"k": {"S": "a"}}, {"x": {"S": "b"}})]
        with pytest.raises(ddb.exceptions.ClientError):
            ddb.batch_write_item(RequestItems={"t": puts})
        before = "Item" in ddb.get_item(TableName="t", Key={"k": {"S": "a"}})
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        ddb = _client(server, "dynamodb")
        assert ("Item" in ddb.get_item(TableName="t", Key={"k": {"S": "a"}})) == before


def test_a_second_server_is_kept_off_a_data_dir_in_use(tmp_path: Path) -> None:
    from cirrusmq_local.moto_persist import _lock_directory

    in_use = pytest.raises(RuntimeError, match="in use by another server")
    with MotoServer(data_dir=tmp_path), in_use:
        _lock_directory(tmp_path, wait=0.0)
    _lock_directory(tmp_path, wait=0.0).close()
