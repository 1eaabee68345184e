"""Queue actions: CreateQueue, GetQueueUrl, ListQueues, Get/SetQueueAttributes, DeleteQueue,
PurgeQueue — over the admin (topics), consume (group status) and offset-reset services."""

from __future__ import annotations

from typing import Any

from cirrusmq_broker import limits
from cirrusmq_broker.errors import TopicAlreadyExists, TopicNotFound
from cirrusmq_broker.model import MessageType, Topic
from cirrusmq_broker.rules.retries import (
    MAX_MAX_DELIVERY_ATTEMPTS,
    MIN_MAX_DELIVERY_ATTEMPTS,
    retry_topic,
)

from . import naming, permissions, queue_attributes, tags
from .context import Call, int_param, list_param, str_param
from .errors import SqsError, queue_does_not_exist
from .message_attributes import SOURCE_PROPERTY
from .naming import QueueName

MAX_LIST_RESULTS = 1000
DELAY_MINUTES = 15
"""SQS's longest delay: ApproximateNumberOfMessagesDelayed counts the delayed messages due
within it (and those just due, not yet released)."""
HELD_WINDOW_MS = (DELAY_MINUTES + 1) * 60_000
"""A FIFO send waits in its group's order until its queue's delay ends: a message still
waiting was stored within SQS's longest delay (and a minute of clock skew)."""


def active_topic(call: Call, queue: QueueName) -> Topic:
    """The queue's topic (QueueDoesNotExist when there is none of the queue's kind)."""
    try:
        topic = call.broker.catalog.active(queue.topic)
    except TopicNotFound:
        raise queue_does_not_exist() from None
    if (topic.message_type is MessageType.FIFO) != queue.fifo:
        raise queue_does_not_exist()
    return topic


def attributes_of(call: Call, queue: QueueName) -> dict[str, str]:
    return queue_attributes.effective(call.broker.sqs_queues.get(queue.group), fifo=queue.fifo)


def create_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.queue_name(str_param(params, "QueueName")))
    call.require_admin(f"create queue {queue.name}")
    wanted = queue_attributes.check(params.get("Attributes"), fifo=queue.fifo, creating=True)
    wanted_tags = tags.check(params["tags"], queue, present={}) if params.get("tags") else {}
    _check_redrive(call, queue, wanted)
    now = call.broker.clock()
    stored = queue_attributes.updated({}, {**wanted, "CreatedTimestamp": str(now // 1000)})
    if queue.fifo:
        scope = queue_attributes.effective(wanted, fifo=True)["DeduplicationScope"]
        stored[queue_attributes.DEDUP_SCOPE_AT_CREATION] = scope
    try:
        call.broker.admin.create_topic(
            queue.topic,
            queues=limits.DEFAULT_QUEUES,
            message_type=(MessageType.FIFO if queue.fifo else MessageType.NORMAL).value,
            retention_hours=queue_attributes.retention_hours(
                queue_attributes.effective(wanted, fifo=queue.fifo)
            ),
        )
    except TopicAlreadyExists:
        topic = call.broker.catalog.active(queue.topic)
        if (topic.message_type is MessageType.FIFO) != queue.fifo:
            raise _exists("FifoQueue") from None
        existing = call.broker.sqs_queues.get(queue.group)
        if existing is not None:
            current = queue_attributes.effective(existing, fifo=queue.fifo)
            conflicts = queue_attributes.conflicts(queue_attributes.shown(current), wanted)
            if conflicts:
                raise _exists(conflicts[0]) from None
            return {"QueueUrl": queue.url(call.endpoint)}
        stored["CreatedTimestamp"] = str(topic.created_timestamp // 1000)
    stored["LastModifiedTimestamp"] = stored["CreatedTimestamp"]
    call.broker.sqs_queues.put(queue.group, tags.with_tags(stored, wanted_tags))
    _apply_redrive(call, queue, stored, {})
    return {"QueueUrl": queue.url(call.endpoint)}


def _exists(attribute: str) -> SqsError:
    """SQS names the (first) attribute whose value differs."""
    return SqsError(
        "QueueNameExists",
        f"A queue already exists with the same name and a different value for attribute "
        f"{attribute}",
        query_code="QueueAlreadyExists",
    )


def _check_redrive(call: Call, queue: QueueName, attributes: dict[str, str]) -> None:
    """The RedrivePolicy's dead-letter queue must exist and be of the queue's kind (SQS
    takes the queue itself)."""
    policy = queue_attributes.redrive_policy(attributes.get("RedrivePolicy", ""))
    if policy is None:
        return
    target = call.resolve(naming.from_arn(policy[0]))
    if target.fifo != queue.fifo:
        raise SqsError(
            "InvalidParameterValue",
            "Value for parameter RedrivePolicy is invalid. Reason: the dead-letter queue must "
            "be a queue of the same type (standard or FIFO).",
        )
    try:
        active_topic(call, target)
    except SqsError:
        raise SqsError(
            "InvalidParameterValue",
            "Value for parameter RedrivePolicy is invalid. Reason: Dead letter target does "
            "not exist.",
        ) from None


def _apply_redrive(
    call: Call, queue: QueueName, attributes: dict[str, str], previous: dict[str, str]
) -> None:
    """RedrivePolicy: maxReceiveCount is the group's delivery attempts, and the dead-letter
    queue named by the ARN is the group's dead-letter destination: the broker's dead-letter
    move appends a message that failed its last attempt straight into that queue's topic,
    with the property ``sqs.source`` naming this queue (the dead-letter queue records its
    sources). Without a policy SQS redelivers until the retention ends: the group gets the
    most attempts CirrusMQ allows, its dead letters (if any) go to its own dead-letter topic,
    and a dead-letter queue it named before forgets it. A queue that is its own dead-letter
    queue keeps its messages as SQS does (a message moved into the queue it is in stays
    there, its receives counted on): as without a policy."""
    policy = _other_queue_policy(call, queue, attributes)
    before = _other_queue_policy(call, queue, previous)
    target = call.resolve(naming.from_arn(policy[0])) if policy is not None else None
    if before is not None and call.resolve(naming.from_arn(before[0])) != target:
        _set_source(call, call.resolve(naming.from_arn(before[0])), queue, present=False)
    if target is not None:
        _set_source(call, target, queue, present=True)
    attempts = MAX_MAX_DELIVERY_ATTEMPTS if policy is None else policy[1]
    attempts = min(max(attempts, MIN_MAX_DELIVERY_ATTEMPTS), MAX_MAX_DELIVERY_ATTEMPTS)
    call.broker.retries.set_dead_letter_destination(
        queue.group,
        target.topic if target is not None else None,
        {SOURCE_PROPERTY: queue.name},
    )
    call.broker.retries.set_max_delivery_attempts(queue.group, attempts)


def _other_queue_policy(
    call: Call, queue: QueueName, attributes: dict[str, str]
) -> tuple[str, int] | None:
    """The RedrivePolicy's (dead-letter queue ARN, maxReceiveCount), None without one or
    when it names the queue itself."""
    policy = queue_attributes.redrive_policy(attributes.get("RedrivePolicy", ""))
    if policy is None or call.resolve(naming.from_arn(policy[0])).name == queue.name:
        return None
    return policy


def keep_dead_letter_destination(call: Call, queue: QueueName, attributes: dict[str, str]) -> None:
    """A queue whose RedrivePolicy was stored by a release that set no dead-letter
    destination gets its destination now (before the receive whose expiry may dead-letter).
    The group's settings are cached per container: usually no read."""
    policy = _other_queue_policy(call, queue, attributes)
    if policy is None or call.broker.retries.dead_letter_destination(queue.group) is not None:
        return
    call.broker.retries.set_dead_letter_destination(
        queue.group, call.resolve(naming.from_arn(policy[0])).topic, {SOURCE_PROPERTY: queue.name}
    )


def _set_source(call: Call, target: QueueName, queue: QueueName, *, present: bool) -> None:
    """Add the queue to (or remove it from) the source queues a dead-letter queue records."""

    def change(stored: dict[str, str] | None) -> dict[str, str] | None:
        if stored is None and not present:
            return None
        names = queue_attributes.sources(stored or {})
        if (queue.name in names) == present:
            return stored
        names = [*names, queue.name] if present else [n for n in names if n != queue.name]
        return {**(stored or {}), queue_attributes.SOURCES: " ".join(names)}

    try:
        call.broker.sqs_queues.update(target.group, change)
    except TopicNotFound:
        return  # the dead-letter queue was deleted meanwhile: nothing to record there


def get_queue_url(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.queue_name(str_param(params, "QueueName")))
    call.require(call.principal.permissions.may_see_topic(queue.topic), f"see queue {queue.name}")
    active_topic(call, queue)
    return {"QueueUrl": queue.url(call.endpoint)}


def list_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    prefix = str_param(params, "QueueNamePrefix", required=False) or ""
    most = int_param(params, "MaxResults", 1, MAX_LIST_RESULTS) or MAX_LIST_RESULTS
    after = str_param(params, "NextToken", required=False) or ""
    permissions = call.principal.permissions
    names = []
    for topic in call.broker.admin.list_topics():
        queue = naming.from_topic(topic.name, fifo=topic.message_type is MessageType.FIFO)
        if queue is None or (queue.legacy and not call.resolve(QueueName(queue.name)).legacy):
            continue  # not a queue's topic (a standard ..._fifo: only as an earlier release's)
        visible = permissions.may_see_topic(topic.name)
        if visible and queue.name.startswith(prefix) and queue.name > after:
            names.append(queue)
    names.sort(key=lambda q: q.name)
    page = names[:most]
    # SQS leaves QueueUrls out when no queue matches (JSON {}, query <ListQueuesResult/>)
    result: dict[str, Any] = {"QueueUrls": [q.url(call.endpoint) for q in page]} if page else {}
    if len(names) > most and "MaxResults" in params:
        result["NextToken"] = page[-1].name
    return result


def get_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(call.principal.permissions.may_see_topic(queue.topic), f"see queue {queue.name}")
    wanted = list_param(params, "AttributeNames")
    topic = active_topic(call, queue)
    every = "All" in wanted
    known = set(queue_attributes.DEFAULTS) | set(queue_attributes.READ_ONLY)
    for name in wanted:
        if name != "All" and name not in known and name not in _OPTIONAL:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
    values = attributes_of(call, queue)
    values.setdefault("CreatedTimestamp", str(topic.created_timestamp // 1000))
    values.setdefault("LastModifiedTimestamp", values["CreatedTimestamp"])
    values["QueueArn"] = queue.arn(call.region)
    if every or any(n.startswith("ApproximateNumberOfMessages") for n in wanted):
        values.update(_counts(call, queue, topic))
    chosen = {k: v for k, v in queue_attributes.shown(values).items() if every or k in wanted}
    return {"Attributes": chosen} if chosen else {}


_OPTIONAL = frozenset(
    ("Policy", "RedrivePolicy", "RedriveAllowPolicy", "FifoQueue", "ContentBasedDeduplication")
    + ("KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled")
    + ("DeduplicationScope", "FifoThroughputLimit")
)


def approximate_count(call: Call, queue: QueueName) -> int:
    """The queue's messages, visible and in flight (a move task's ToMove)."""
    counts = _counts(call, queue, active_topic(call, queue))
    return int(counts["ApproximateNumberOfMessages"]) + int(
        counts["ApproximateNumberOfMessagesNotVisible"]
    )


def _counts(call: Call, queue: QueueName, topic: Topic) -> dict[str, str]:
    """The approximate counts: unread and in-flight messages of the queue's group (an
    in-flight message whose visibility timeout passed counts as visible), those in its retry
    topic (moved there while flow control held their topic queue, or sent back there by a
    dead-letter redrive) included. Delayed: the
    standard queue's delay items, and a FIFO queue's sends whose not-before time is still
    ahead (from the log index, one query per topic queue with unread messages)."""
    description = call.broker.admin.describe_topic(topic.name)
    # the group's queues, and its retry topic's, unread ones included (from offset 0)
    status = call.broker.consume.describe_group(queue.group)
    by_queue = {s.queue: s for s in status.queues if s.topic == topic.name}
    visible = inflight = 0
    retry = retry_topic(queue.group, topic.name)
    moved = {s.queue: s for s in status.queues if s.topic == retry}
    for state in moved.values():
        invisible = state.inflight - state.overdue
        inflight += invisible
        visible += max(0, state.lag - invisible)
    now = call.broker.clock()
    held = 0
    for offsets in description.queue_offsets:
        state = by_queue.get(offsets.queue)
        invisible = 0 if state is None else state.inflight - state.overdue
        start = (
            offsets.min_offset if state is None else max(state.committed_offset, offsets.min_offset)
        )
        waiting = 0
        if queue.fifo and offsets.max_offset > start + invisible:
            waiting = call.broker.index.held_count(
                topic.name, offsets.queue, now=now, stored_since=now - HELD_WINDOW_MS,
                from_offset=start,
            )  # fmt: skip
        inflight += invisible
        held += waiting
        visible += max(0, offsets.max_offset - start - invisible - waiting)
    now_minute = now // 60_000
    delayed = held + call.broker.delay_items.pending_count(
        topic.name, range(now_minute - 1, now_minute + DELAY_MINUTES + 1)
    )
    return {
        "ApproximateNumberOfMessages": str(visible),
        "ApproximateNumberOfMessagesNotVisible": str(inflight),
        "ApproximateNumberOfMessagesDelayed": str(delayed),
    }


def set_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"set attributes of queue {queue.name}")
    if params.get("Attributes") is None:
        raise SqsError("MissingParameter", "The request must contain the parameter Attributes.")
    changes = queue_attributes.check(params.get("Attributes"), fifo=queue.fifo, creating=False)
    active_topic(call, queue)
    _check_redrive(call, queue, changes)
    if "MessageRetentionPeriod" in changes:  # the topic keeps what is sent from now that long
        call.broker.admin.update_topic(
            queue.topic, retention_hours=queue_attributes.retention_hours(changes)
        )
    modified = str(call.broker.clock() // 1000)
    previous: dict[str, str] = {}

    def change(stored: dict[str, str] | None) -> dict[str, str]:
        previous.clear()
        previous.update(stored or {})
        return queue_attributes.updated(previous, {**changes, "LastModifiedTimestamp": modified})

    stored = call.broker.sqs_queues.update(queue.group, change) or {}
    if "RedrivePolicy" in changes:
        _apply_redrive(call, queue, stored, previous)
    return {}


def delete_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"delete queue {queue.name}")
    active_topic(call, queue)
    try:
        call.broker.admin.delete_topic(queue.topic)
    except TopicNotFound:
        raise queue_does_not_exist() from None
    call.broker.sqs_queues.delete(queue.group)
    return {}


def purge_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """Moves the queue's group to the end of its topic: what was sent before is skipped."""
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(
        call.principal.permissions.may_subscribe(queue.group, queue.topic),
        f"purge queue {queue.name}",
    )
    active_topic(call, queue)
    call.broker.offset_reset.reset(queue.group, queue.topic, "latest")
    # what was sent before: no longer deduplicates a FIFO send; delayed, deleted when due
    purged = str(call.broker.clock())
    call.broker.sqs_queues.update(
        queue.group, lambda stored: {**(stored or {}), queue_attributes.PURGED: purged}
    )
    return {}


def list_dead_letter_source_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(call.principal.permissions.may_see_topic(queue.topic), f"see queue {queue.name}")
    active_topic(call, queue)
    permissions = call.principal.permissions
    sources = [
        call.resolve(naming.queue_name(n))
        for n in queue_attributes.sources(attributes_of(call, queue))
    ]
    visible = sorted(
        (q for q in sources if permissions.may_see_topic(q.topic)), key=lambda q: q.name
    )
    return {"queueUrls": [q.url(call.endpoint) for q in visible]}


def tag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"tag queue {queue.name}")
    active_topic(call, queue)
    return tags.tag_queue(call, queue, params)


def untag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"untag queue {queue.name}")
    active_topic(call, queue)
    return tags.untag_queue(call, queue, params)


def list_queue_tags(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require(call.principal.permissions.may_see_topic(queue.topic), f"see queue {queue.name}")
    active_topic(call, queue)
    return tags.list_queue_tags(call, queue)


def add_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"share queue {queue.name}")
    active_topic(call, queue)
    return permissions.add_permission(call, queue, params)


def remove_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue = call.resolve(naming.from_url(params.get("QueueUrl")))
    call.require_admin(f"share queue {queue.name}")
    active_topic(call, queue)
    return permissions.remove_permission(call, queue, params)
