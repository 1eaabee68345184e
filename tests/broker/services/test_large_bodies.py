"""Large bodies on in-process moto: the upload grant, the pointer checks a send makes, the
stored form (the SQS Extended Client's pointer), and refused pointers that store nothing."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs, unquote, urlparse

import boto3
import pytest
from broker_helpers import index_items
from cirrusmq_broker import limits
from cirrusmq_broker.errors import InvalidLargeBody, InvalidMessage, MessageTooLarge
from cirrusmq_broker.model import LargeBody, MessageInput
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.services.large_bodies import (
    KEY_PROPERTY,
    SHA256_PROPERTY,
    SIZE_PROPERTY,
    stored_pointer,
)


def upload(broker, topic: str, data: bytes) -> LargeBody:
    """Upload ``data`` through a grant as a producer would (boto3 stands in for the URLs)."""
    grant = broker.large_bodies.grant(topic, len(data))
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = broker.settings.bucket
    etag = s3.upload_part(
        Bucket=bucket,
        Key=grant.upload.key,
        UploadId=grant.upload.upload_id,
        PartNumber=1,
        Body=data,
    )["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key=grant.upload.key,
        UploadId=grant.upload.upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    return LargeBody(grant.upload.key, len(data), hashlib.sha256(data).hexdigest())


def test_a_grant_presigns_one_url_per_64_mib_part_under_the_topic_prefix(broker):
    broker.admin.create_topic("t", retention_hours=24)
    grant = broker.large_bodies.grant("t", 2 * limits.LARGE_BODY_PART_BYTES + 1)
    assert grant.upload.key.startswith("topics/topic=t/_bodies/dt=")
    assert len(grant.upload.part_urls) == 3 and grant.part_bytes == 64 * 1024 * 1024
    query = parse_qs(urlparse(grant.upload.part_urls[2]).query)
    assert query["partNumber"] == ["3"] and query["uploadId"] == [grant.upload.upload_id]
    uploads = boto3.client("s3").list_multipart_uploads(Bucket=broker.settings.bucket)
    assert [u["Key"] for u in uploads["Uploads"]] == [grant.upload.key]


def test_the_body_object_is_kept_as_long_as_a_dead_letter_copy(broker):
    broker.admin.create_topic("t", retention_hours=24)
    pointer = upload(broker, "t", b"x" * 1000)
    tags = boto3.client("s3").get_object_tagging(Bucket=broker.settings.bucket, Key=pointer.key)
    assert tags["TagSet"] == [{"Key": "cirrusmq-retention-days", "Value": "14"}]


def test_a_large_message_is_stored_as_the_extended_clients_pointer(broker):
    broker.admin.create_topic("t")
    pointer = upload(broker, "t", b"payload" * 1000)
    inputs = broker.large_bodies.resolve("t", [MessageInput(b"", large_body=pointer)])
    (receipt,) = broker.produce.send("t", inputs).receipts
    stored = broker.lookup.lookup("t", receipt.message_id)
    assert json.loads(stored.body) == [
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        {"s3BucketName": broker.settings.bucket, "s3Key": pointer.key},
    ]
    assert stored.properties[SIZE_PROPERTY] == "7000"
    assert stored.properties[KEY_PROPERTY] == pointer.key
    assert stored.properties[SHA256_PROPERTY] == pointer.sha256
    assert stored_pointer(stored.properties) == pointer
    url = broker.large_bodies.download_url(stored.properties)
    assert url is not None and unquote(urlparse(url).path).endswith(pointer.key)
    assert "X-Amz-Signature=" in url  # Signature Version 4


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            lambda p: LargeBody(
                "topics/topic=other/_bodies/dt=2026-12-02/" + "0" * 26, 7, p.sha256
            ),
            InvalidLargeBody,
        ),  # another topic's prefix
        (
            lambda p: LargeBody("topics/topic=t/queue=0/dt=2026-12-02/x.parquet", 7, p.sha256),
            InvalidLargeBody,
        ),  # not a body the service handed out
        (
            lambda p: LargeBody(p.key[:-1] + ("A" if p.key[-1] != "A" else "B"), 7, p.sha256),
            InvalidLargeBody,
        ),  # no such object
        (lambda p: LargeBody(p.key, 8, p.sha256), InvalidLargeBody),  # size mismatch
        (lambda p: LargeBody(p.key, 7, "ABC"), InvalidLargeBody),  # malformed hash
        (lambda p: LargeBody(p.key, limits.MAX_LARGE_BODY_BYTES + 1, p.sha256), MessageTooLarge),
    ],
)
def test_a_bad_pointer_is_refused_and_nothing_is_stored(broker, change, error):
    broker.admin.create_topic("t")
    broker.admin.create_topic("other")
    pointer = upload(broker, "t", b"1234567")
    with pytest.raises(error):
        broker.large_bodies.resolve("t", [MessageInput(b"", large_body=change(pointer))])
    assert index_items(broker) == []


def test_a_pointer_with_an_inline_body_is_refused(broker):
    broker.admin.create_topic("t")
    pointer = upload(broker, "t", b"1234567")
    with pytest.raises(InvalidLargeBody):
        broker.large_bodies.resolve("t", [MessageInput(b"inline", large_body=pointer)])


def test_a_grant_above_2_gib_is_refused(broker):
    broker.admin.create_topic("t")
    with pytest.raises(MessageTooLarge):
        broker.large_bodies.grant("t", limits.MAX_LARGE_BODY_BYTES + 1)
    assert "Uploads" not in boto3.client("s3").list_multipart_uploads(Bucket=broker.settings.bucket)


def test_the_services_pointer_properties_cannot_be_set_by_a_sender(broker):
    broker.admin.create_topic("t")
    forged = {KEY_PROPERTY: "topics/topic=t/_bodies/dt=2026-12-02/" + "0" * 26}
    with pytest.raises(InvalidMessage):
        broker.produce.send("t", [MessageInput(b"x", properties=forged)])
    assert index_items(broker) == []


def test_a_deleted_topics_purge_leaves_its_bodies_to_their_lifecycle_tier(broker, clock, s3_clock):
    """A dead letter (another topic) may still point at the body: only its tier expires it."""
    broker.admin.create_topic("t")
    pointer = upload(broker, "t", b"payload")
    broker.produce.send(
        "t", broker.large_bodies.resolve("t", [MessageInput(b"", large_body=pointer)])
    )
    broker.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == ["t"]
    listed = boto3.client("s3").list_objects_v2(Bucket=broker.settings.bucket, Prefix="topics/")
    assert [o["Key"] for o in listed["Contents"]] == [pointer.key]


def test_a_pointer_to_a_body_granted_long_before_the_send_is_refused(broker, clock):
    """The body's lifecycle tier (14 days for this topic) counts from its upload: a message
    sent 13 days later, and its dead-letter copy (14 days from when it dies), would point
    at an object S3 deletes under them. A send names a body granted within the last day."""
    broker.admin.create_topic("t", retention_hours=24)
    pointer = upload(broker, "t", b"1234567")
    clock.advance(13 * 24 * 3600)
    with pytest.raises(InvalidLargeBody):
        broker.large_bodies.resolve("t", [MessageInput(b"", large_body=pointer)])


def test_a_key_whose_last_part_is_not_a_ulid_is_refused_with_a_400(broker):
    broker.admin.create_topic("t")
    key = "topics/topic=t/_bodies/dt=2026-12-02/" + "Z" * 26  # past the ULID range
    with pytest.raises(InvalidLargeBody):
        broker.large_bodies.resolve(
            "t", [MessageInput(b"", large_body=LargeBody(key, 7, "0" * 64))]
        )
