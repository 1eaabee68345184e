"""SqsFunction: the SQS API (JSON 1.0 and query protocol) on the same endpoint."""

import cirrusmq_broker.codec  # noqa: F401 - pyarrow at init: receives read batches
from cirrusmq_api.compat.sqs.handler import authenticated_key, handle
from cirrusmq_api.observability import observe
from cirrusmq_broker.telemetry import traced


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return observe(event, context, lambda: handle(event), authenticated_key)
