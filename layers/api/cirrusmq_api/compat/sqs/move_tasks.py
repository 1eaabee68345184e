"""Message move tasks: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask
over the broker's move tasks (cirrusmq_broker.services.move_tasks).

A dead-letter queue's messages carry the property ``sqs.source`` (the queue they died in,
set by the source group's dead-letter destination, see queue_actions.py): a task without
DestinationArn sends each back there. The broker runs the task within the Start request for
up to its run time; one left RUNNING (a long queue, a runner that died) goes on when a Start
for the same queue comes after its runner's hold passed.
"""

from __future__ import annotations

from typing import Any

from cirrusmq_broker.errors import BrokerError, MoveTaskNotFound, MoveTaskRunning, TopicNotFound
from cirrusmq_broker.services.move_tasks import MAX_LISTED, MAX_PER_SECOND, MoveTaskId
from cirrusmq_broker.storage.move_tasks import RUNNING, MoveTask

from . import naming, queue_attributes
from .context import Call, int_param, str_param
from .errors import SqsError, from_broker
from .message_attributes import SOURCE_PROPERTY
from .naming import QueueName
from .queue_actions import approximate_count, attributes_of


def _not_found(message: str) -> SqsError:
    return SqsError("ResourceNotFoundException", message)


def _queue(call: Call, arn: object, what: str) -> QueueName:
    """The existing queue an ARN names (ResourceNotFoundException otherwise)."""
    queue = call.resolve(naming.from_arn(arn))
    try:
        call.broker.catalog.active(queue.topic)
    except TopicNotFound:
        raise _not_found(f"The {what} queue {queue.name} does not exist.") from None
    return queue


def start_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    source = _queue(call, str_param(params, "SourceArn"), "source")
    call.require_admin(f"move messages of queue {source.name}")
    destination = params.get("DestinationArn")
    target = _queue(call, destination, "destination") if destination is not None else None
    if target is not None and target.topic == source.topic:
        raise SqsError(
            "InvalidParameterValue",
            "Value for parameter DestinationArn is invalid. Reason: the destination queue must "
            "be another queue than the source queue.",
        )
    if target is not None and target.fifo != source.fifo:
        raise SqsError(
            "InvalidParameterValue",
            "The source queue and the destination queue must be of the same type "
            "(standard or FIFO).",
        )
    rate = int_param(params, "MaxNumberOfMessagesPerSecond", 1, MAX_PER_SECOND)
    sources = [
        call.resolve(naming.queue_name(n))
        for n in queue_attributes.sources(attributes_of(call, source))
    ]
    if not sources:
        raise SqsError(
            "UnsupportedOperation", "Source queue must be configured as a Dead Letter Queue."
        )
    routes = {q.name: q.topic for q in sources}
    if len(sources) == 1:
        routes[""] = sources[0].topic
    tasks = call.broker.move_tasks
    try:
        task = tasks.start(
            source.group, source.topic,
            destination=target.topic if target is not None else None,
            route_property=SOURCE_PROPERTY, routes=routes, max_per_second=rate,
            to_move=approximate_count(call, source),
        )  # fmt: skip
        tasks.run(task)
    except MoveTaskRunning:
        raise SqsError(
            "UnsupportedOperation",
            "Only one active message movement task is supported per queue at a time.",
        ) from None
    except BrokerError as exc:
        raise from_broker(exc, source.name) from None
    return {"TaskHandle": MoveTaskId(task.group, task.stream).handle}


def list_message_move_tasks(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    source = _queue(call, str_param(params, "SourceArn"), "source")
    call.require(call.principal.permissions.may_see_topic(source.topic), f"see {source.name}")
    most = int_param(params, "MaxResults", 1, MAX_LISTED) or 1
    tasks = call.broker.move_tasks.recent(source.group, most)
    return {"Results": [_entry(call, source, t) for t in tasks]}


def cancel_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    handle = str_param(params, "TaskHandle")
    assert handle is not None
    task_id = MoveTaskId.parse(handle)
    if task_id is None:
        raise _not_found("The task handle is not valid or the task is not running.")
    call.require_admin("cancel a message move task")
    try:
        task = call.broker.move_tasks.cancel(task_id)
    except MoveTaskNotFound:
        raise _not_found("The task handle is not valid or the task is not running.") from None
    return {"ApproximateNumberOfMessagesMoved": task.moved}


def _entry(call: Call, source: QueueName, task: MoveTask) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Status": task.status,
        "SourceArn": source.arn(call.region),
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move,
        "StartedTimestamp": task.started,
    }
    if task.status == RUNNING:
        entry["TaskHandle"] = MoveTaskId(task.group, task.stream).handle
    if task.destination_topic is not None:
        queue = naming.from_topic(task.destination_topic, fifo=source.fifo)
        if queue is not None:
            entry["DestinationArn"] = queue.arn(call.region)
    if task.max_per_second is not None:
        entry["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    if task.failure is not None:
        entry["FailureReason"] = task.failure
    return entry
