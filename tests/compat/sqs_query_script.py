"""Run by tests/compat/test_sqs_query.py inside .venv-sqs-query (boto3 1.28.80 on botocore
1.31.80, whose SQS client speaks the query protocol): drives the adapter and prints what it
answered as one JSON document. Arguments: endpoint, access key, secret key, queue name."""

import json
import sys

import boto3
from botocore.exceptions import ClientError

endpoint, access_key, secret_key, name = sys.argv[1:5]
sqs = boto3.client(
    "sqs",
    endpoint_url=endpoint,
    region_name="ap-southeast-2",
    aws_access_key_id=access_key,
    aws_secret_access_key=secret_key,
)
out = {"protocol": sqs.meta.service_model.protocol}
url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
out["url"] = url
out["again"] = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
out["get_url"] = sqs.get_queue_url(QueueName=name)["QueueUrl"]
out["listed"] = sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
out["attributes"] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
attributes = {
    "city": {"DataType": "String", "StringValue": "Zürich"},
    "count": {"DataType": "Number", "StringValue": "3"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
}
sent = sqs.send_message(QueueUrl=url, MessageBody="über <xml> & co", MessageAttributes=attributes)
out["sent"] = sent["MessageId"]
out["sent_md5"] = [sent["MD5OfMessageBody"], sent["MD5OfMessageAttributes"]]
batch = sqs.send_message_batch(
    QueueUrl=url,
    Entries=[{"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": "two"}],
)
out["batch"] = sorted(s["Id"] for s in batch.get("Successful", []))
received = sqs.receive_message(
    QueueUrl=url,
    MaxNumberOfMessages=10,
    MessageAttributeNames=["All"],
    AttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
).get("Messages", [])
out["received"] = [
    {
        "id": m["MessageId"],
        "body": m["Body"],
        "md5": m["MD5OfBody"],
        "attributes_md5": m.get("MD5OfMessageAttributes"),
        "count": m["Attributes"]["ApproximateReceiveCount"],
        "blob": (m.get("MessageAttributes", {}).get("blob") or {}).get("BinaryValue", b"").hex(),
        "city": (m.get("MessageAttributes", {}).get("city") or {}).get("StringValue"),
    }
    for m in received
]
handles = [m["ReceiptHandle"] for m in received]
sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handles[0], VisibilityTimeout=100)
sqs.delete_message(QueueUrl=url, ReceiptHandle=handles[0])
deleted = sqs.delete_message_batch(
    QueueUrl=url,
    Entries=[{"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(handles[1:])]
    + [{"Id": "forged", "ReceiptHandle": "forged"}],
)
out["deleted"] = sorted(s["Id"] for s in deleted.get("Successful", []))
out["delete_failed"] = [(f["Id"], f["Code"]) for f in deleted.get("Failed", [])]
errors = {}
for label, call in {
    "missing": lambda: sqs.get_queue_url(QueueName=name + "-missing"),
    "too_many": lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11),
    "handle": lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="forged"),
    "exists": lambda: sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "46"}),
}.items():
    try:
        call()
        errors[label] = None
    except ClientError as exc:
        errors[label] = [exc.response["Error"]["Code"], exc.response["Error"].get("Type")]
out["errors"] = errors
try:
    sqs.get_queue_url(QueueName=name + "-missing")
except sqs.exceptions.QueueDoesNotExist:
    out["modeled_exception"] = True
sqs.purge_queue(QueueUrl=url)
sqs.delete_queue(QueueUrl=url)
out["after_delete"] = sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
print(json.dumps(out))
