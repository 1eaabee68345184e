"""The moto server on a data dir (:mod:`cirrusmq_local.moto_persist`), as a real process:
what a restart brings back — after a stop, after ``kill -9``, with a torn journal tail —
and that it comes back the same (S3 times, TTL deletions, KMS keys)."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from cirrusmq_local.moto import DUMMY_CREDENTIALS, REGION, MotoServer
from cirrusmq_local.moto_persist import JOURNAL
from cirrusmq_local.moto_serial import COMPACT_VAR


def _client(server: MotoServer, service: str) -> Any:
    return boto3.client(service, endpoint_url=server.url, region_name=REGION, **DUMMY_CREDENTIALS)


def _kill_9(server: MotoServer) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    server.stop()


def _table(ddb: Any) -> None:
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.update_time_to_live(
        TableName="t", TimeToLiveSpecification={"AttributeName": "ttl", "Enabled": True}
    )


def _keys(ddb: Any) -> set[str]:
    return {item["k"]["S"] for item in ddb.scan(TableName="t")["Items"]}


@pytest.mark.parametrize("crash", [False, True], ids=["stop", "kill-9"])
def test_items_objects_and_keys_come_back_the_same(tmp_path: Path, crash: bool) -> None:
    with MotoServer(data_dir=tmp_path) as server:
        ddb, s3, kms = (_client(server, s) for s in ("dynamodb", "s3", "kms"))
        _table(ddb)
        ddb.put_item(TableName="t", Item={"k": {"S": "a"}})
        ddb.put_item(
            TableName="t",
            Item={"k": {"S": "b"}},
            ConditionExpression="attribute_not_exists(k)",
        )
        with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
            ddb.put_item(
                TableName="t",
                Item={"k": {"S": "b"}, "v": {"S": "lost"}},
                ConditionExpression="attribute_not_exists(k)",
            )
        s3.create_bucket(Bucket="kept-bucket")
        s3.put_object(Bucket="kept-bucket", Key="a/b c", Body=b"\x00body")
        modified = s3.head_object(Bucket="kept-bucket", Key="a/b c")["LastModified"]
        key = kms.create_key()["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName="alias/kept", TargetKeyId=key)
        secret = kms.encrypt(KeyId="alias/kept", Plaintext=b"secret")["CiphertextBlob"]
        ddb.put_item(TableName="t", Item={"k": {"S": "c"}})  # journaled after the snapshot
        if crash:
            _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        ddb, s3, kms = (_client(server, s) for s in ("dynamodb", "s3", "kms"))
        assert _keys(ddb) == {"a", "b", "c"}
        assert "v" not in ddb.get_item(TableName="t", Key={"k": {"S": "b"}})["Item"]
        body = s3.get_object(Bucket="kept-bucket", Key="a/b c")
        assert body["Body"].read() == b"\x00body" and body["LastModified"] == modified
        assert kms.decrypt(CiphertextBlob=secret)["Plaintext"] == b"secret"


def _expire(server: MotoServer, now_s: float) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{server.url}/_cirrusmq/ttl",
        data=json.dumps({"now_s": now_s, "tables": ["t"]}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_ttl_deletions_stay_deleted_and_a_torn_tail_is_cut_off(tmp_path: Path) -> None:
    with MotoServer(data_dir=tmp_path) as server:
        ddb = _client(server, "dynamodb")
        _table(ddb)
        for key, ttl in (("old", "100"), ("new", "900")):
            ddb.put_item(TableName="t", Item={"k": {"S": key}, "ttl": {"N": ttl}})
        assert _expire(server, 500)["tables"]["t"]["deleted"] == 1
        _kill_9(server)
    with (tmp_path / JOURNAL).open("ab") as journal:
        journal.write(b"\x40\x00\x00\x00\x01\x02")  # a record cut short by the crash
    with MotoServer(data_dir=tmp_path) as server:
        ddb = _client(server, "dynamodb")
        assert _keys(ddb) == {"new"}
        ddb.put_item(TableName="t", Item={"k": {"S": "after"}})
    with MotoServer(data_dir=tmp_path) as server:
        assert _keys(_client(server, "dynamodb")) == {"new", "after"}


def test_a_journal_past_its_bound_is_compacted_while_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(COMPACT_VAR, "4096")
    with MotoServer(data_dir=tmp_path) as server:
        ddb = _client(server, "dynamodb")
        _table(ddb)
        for i in range(60):
            ddb.put_item(TableName="t", Item={"k": {"S": f"k{i}"}, "v": {"S": "x" * 100}})
        assert (tmp_path / JOURNAL).stat().st_size < 4096 + 2048  # bound + one record
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        assert _keys(_client(server, "dynamodb")) == {f"k{i}" for i in range(60)}


def test_a_multipart_upload_started_before_a_restart_completes_after_it(tmp_path: Path) -> None:
    part = b"p" * (5 << 20)
    with MotoServer(data_dir=tmp_path) as server:
        s3 = _client(server, "s3")
        s3.create_bucket(Bucket="kept-bucket")
        upload = s3.create_multipart_upload(Bucket="kept-bucket", Key="large")["UploadId"]
        etag = s3.upload_part(
            Bucket="kept-bucket", Key="large", UploadId=upload, PartNumber=1, Body=part
        )["ETag"]
        _kill_9(server)
    with MotoServer(data_dir=tmp_path) as server:
        s3 = _client(server, "s3")
        last = s3.upload_part(
            Bucket="kept-bucket", Key="large", UploadId=upload, PartNumber=2, Body=b"end"
        )["ETag"]
        s3.complete_multipart_upload(
            Bucket="kept-bucket",
            Key="large",
            UploadId=upload,
            MultipartUpload={
                "Parts": [{"PartNumber": 1, "ETag": etag}, {"PartNumber": 2, "ETag": last}]
            },
        )
    with MotoServer(data_dir=tmp_path) as server:
        body = _client(server, "s3").get_object(Bucket="kept-bucket", Key="large")["Body"]
        assert body.read() == part + b"end"
