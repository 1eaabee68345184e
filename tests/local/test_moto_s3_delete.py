"""The local moto server forgets a deleted object's tags (moto keeps them by ARN forever,
which grew a long ``cirrusmq dev`` session by every expired or purged batch object)."""

from __future__ import annotations

import boto3
import pytest
from cirrusmq_local import moto_patches
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends


@pytest.fixture
def s3():
    moto_patches.apply()
    try:
        with mock_aws():
            yield boto3.client("s3", region_name="us-east-1")
    finally:
        moto_patches.revert()


def test_deleted_objects_leave_no_tags_behind(s3) -> None:
    s3.create_bucket(Bucket="tags-bucket")
    for i in range(3):
        s3.put_object(
            Bucket="tags-bucket", Key=f"k{i}", Body=b"x" * 100, Tagging="cirrusmq-retention-days=1"
        )
    tagger = s3_backends[DEFAULT_ACCOUNT_ID]["global"].tagger
    assert len(tagger.tags) == 3
    s3.delete_object(Bucket="tags-bucket", Key="k0")
    s3.delete_objects(Bucket="tags-bucket", Delete={"Objects": [{"Key": "k1"}]})
    assert len(tagger.tags) == 1
    assert s3.get_object_tagging(Bucket="tags-bucket", Key="k2")["TagSet"] == [
        {"Key": "cirrusmq-retention-days", "Value": "1"}
    ]
    assert s3.get_object(Bucket="tags-bucket", Key="k2")["Body"].read() == b"x" * 100
    s3.delete_object(Bucket="tags-bucket", Key="missing")  # S3 answers 204 for a missing key
