"""Run by tests/compat/test_sqs_query.py inside .venv-sqs-query (botocore 1.31.80, query
protocol): the message move task actions on a dead-letter queue the test prepared, each
answer as botocore parsed it, printed as one JSON document. Arguments: endpoint, access key,
secret key, the dead-letter queue's ARN, the destination queue's ARN."""

import json
import sys

import boto3
from botocore.exceptions import ClientError

endpoint, access_key, secret_key, source_arn, destination_arn = sys.argv[1:6]
sqs = boto3.client(
    "sqs",
    endpoint_url=endpoint,
    region_name=source_arn.split(":")[3],
    aws_access_key_id=access_key,
    aws_secret_access_key=secret_key,
)
out = {"protocol": sqs.meta.service_model.protocol}
started = sqs.start_message_move_task(
    SourceArn=source_arn, DestinationArn=destination_arn, MaxNumberOfMessagesPerSecond=50
)
out["handle"] = started.get("TaskHandle")
out["listed"] = sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10).get("Results")
try:
    sqs.cancel_message_move_task(TaskHandle=out["handle"])
    out["cancel"] = None
except ClientError as exc:
    out["cancel"] = exc.response["Error"]["Code"]
print(json.dumps(out))
