"""NotifyFunction: the notification channel's WebSocket routes ($connect, wait,
$disconnect) and its notifier (the queue heads table's DynamoDB stream)."""

from __future__ import annotations

import json
import logging

from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import BrokerError
from cirrusmq_broker.services.notifications import MAX_WAIT_TOPICS
from cirrusmq_broker.telemetry import traced

log = logging.getLogger("cirrusmq.notify")

MAX_NAME = 255
"""Longest group or topic name echoed in an error frame."""


def _error(error: BrokerError, request: object = None) -> dict:
    """The error frame; for a wait that names its group and topics, they are named again
    so that a client with several registrations in flight knows which one was refused."""
    body = {"type": "error", "code": error.code, "message": error.message}
    body.update(_names_of(request))
    return {"statusCode": error.http_status, "body": json.dumps(body)}


def _names_of(request: object) -> dict:
    if not isinstance(request, dict):
        return {}
    group, topics = request.get("group"), request.get("topics")
    if not isinstance(group, str) or len(group) > MAX_NAME or not isinstance(topics, list):
        return {}
    if len(topics) > MAX_WAIT_TOPICS or not all(
        isinstance(t, str) and len(t) <= MAX_NAME for t in topics
    ):
        return {}
    return {"group": group, "topics": sorted(set(topics))}


@traced
def lambda_handler(event: dict, context: object) -> dict:
    broker = current_broker()
    if "Records" in event:  # the DynamoDB stream of the queue heads table
        fan_out = broker.notifier.on_records(event["Records"])
        log.info(
            "fan-out",
            extra={
                "topics": fan_out.topics,
                "notified": fan_out.notified,
                "gone": fan_out.gone,
                "closed": fan_out.closed,
            },
        )
        # the mapping reports batch item failures: Lambda runs the batch again from the
        # earliest record a failed post concerns (an empty list: the batch is done)
        failures = [{"itemIdentifier": sequence} for sequence in fan_out.failed_records]
        return {"batchItemFailures": failures}
    body: object = None
    request = event.get("requestContext") or {}
    route, connection_id = request.get("routeKey"), request.get("connectionId", "")
    try:
        if route == "$connect":
            broker.channel.connect(connection_id, event.get("headers") or {})
            return {"statusCode": 200}
        if route == "$disconnect":
            broker.channel.disconnect(connection_id)
            return {"statusCode": 200}
        try:
            body = json.loads(event.get("body") or "")
        except (ValueError, RecursionError):  # not JSON, or nested deeper than parsable
            body = None
        reply = broker.channel.wait(connection_id, body)
        return {"statusCode": 200, "body": json.dumps(reply)}
    except BrokerError as error:
        if error.http_status >= 500:
            raise
        return _error(error, body)
