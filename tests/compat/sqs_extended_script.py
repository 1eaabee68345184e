"""AWS's SQS Extended Client (``amazon-sqs-extended-client``, unmodified) on a local stack.

Run in its own process: importing the package replaces boto3's Session for the whole
process. Its S3 client is boto3's default one, so ``AWS_ENDPOINT_URL_S3`` points it at the
stack's moto server. Prints one JSON line.

    python sqs_extended_script.py send <endpoint> <queue> <bucket> <body file>
    python sqs_extended_script.py receive <endpoint> <queue>
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import boto3
import sqs_extended_client  # noqa: F401 (patches boto3's Session)


def sqs_client(endpoint: str):  # noqa: ANN201
    return boto3.session.Session(
        aws_access_key_id=os.environ["CIRRUSMQ_ACCESS_KEY"],
        aws_secret_access_key=os.environ["CIRRUSMQ_SECRET_KEY"],
        region_name="eu-west-3",
    ).client("sqs", endpoint_url=endpoint)


def main(action: str, endpoint: str, queue: str, *rest: str) -> dict:
    sqs = sqs_client(endpoint)
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    if action == "send":
        bucket, path = rest
        sqs.large_payload_support = bucket
        with open(path, encoding="utf-8") as body:
            sent = sqs.send_message(QueueUrl=url, MessageBody=body.read())
        return {"message_id": sent["MessageId"]}
    answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, MessageAttributeNames=["All"])
    (message,) = answer["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    body = message["Body"].encode()
    return {
        "message_id": message["MessageId"],
        "size": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "attributes": sorted(message.get("MessageAttributes", {})),
    }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
