"""What every action gets: the broker, the signer, the endpoint and region it was called on."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import TopicNotFound
from cirrusmq_broker.model import MessageType
from cirrusmq_broker.services.auth import Principal

from .errors import access_denied, invalid_parameter
from .naming import QueueName


@dataclass(frozen=True)
class Call:
    broker: Broker
    principal: Principal
    endpoint: str
    """``scheme://host`` the request was sent to: queue URLs start with it."""
    region: str
    """Of the request's credential scope: ARNs carry it."""
    trace_header: str | None = None
    """The request's ``X-Amzn-Trace-Id`` header: a message sent without its own
    ``AWSTraceHeader`` system attribute carries it, as in SQS."""

    def require(self, allowed: bool, action: str) -> None:
        if not allowed:
            raise access_denied(
                f"Access to the resource is denied: this access key may not {action}."
            )

    def require_admin(self, action: str) -> None:
        self.require(self.principal.permissions.admin, action)

    def resolve(self, queue: QueueName) -> QueueName:
        """The queue as stored: a standard queue ``..._fifo`` an earlier release stored under
        its own name (a NORMAL topic of that name and the queue's attributes item) keeps
        that topic; any other name is its own mapping. Other names cost no read."""
        if not queue.may_be_legacy:
            return queue
        legacy = replace(queue, legacy=True)
        if self.broker.sqs_queues.get(legacy.group) is None:
            return queue
        try:
            topic = self.broker.catalog.active(legacy.topic)
        except TopicNotFound:
            return queue
        return legacy if topic.message_type is MessageType.NORMAL else queue


def int_param(
    params: dict[str, Any], name: str, low: int, high: int, reason: str | None = None
) -> int | None:
    """An optional integer parameter (a number, or its text in the query protocol);
    ``reason`` words an out-of-range value's error as SQS does for that parameter."""
    value = params.get(name)
    if value is None:
        return None
    number = as_integer(value)
    if number is None:
        raise invalid_parameter(f"Value {str(value)[:100]} for parameter {name} is invalid.")
    if not low <= number <= high:
        raise invalid_parameter(
            f"Value {value} for parameter {name} is invalid. Reason: "
            + (reason or f"must be between {low} and {high}.")
        )
    return number


def as_integer(value: object) -> int | None:
    """An integer as the JSON protocol (a number) or the query protocol (its text) sends it;
    None for anything else (a bool, a fraction, infinity, NaN, a structure)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    return None


_INTEGER = re.compile(r"[+-]?[0-9]{1,30}")


def str_param(params: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None:
        if required:
            raise invalid_parameter(f"The request must contain the parameter {name}.")
        return None
    if not isinstance(value, str):
        raise invalid_parameter(f"Value for parameter {name} must be a string.")
    return value


def list_param(params: dict[str, Any], name: str) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_parameter(f"Value for parameter {name} must be a list of strings.")
    return value
