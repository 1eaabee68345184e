"""Consumer group inspection: the groups a key may see, one group's offsets and lag, and its
metrics over the last minutes (the console's lag chart)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import AccessDenied
from cirrusmq_broker.services.group_history import MAX_MINUTES

from ..access import current_principal, may_consume
from ..group_list_schemas import (
    DeadLetterPointBody,
    GroupListBody,
    GroupMetricsBody,
    GroupSummaryBody,
    TopicMetricsBody,
    TopicPointBody,
)
from ..schemas import GroupBody, GroupQueueBody, GroupSubscriptionBody, consumer_body

router = APIGatewayHttpRouter()


@router.get("/v1/groups", summary="List the consumer groups the key may see")
def list_groups() -> GroupListBody:
    permissions = current_principal().permissions
    shown = []
    for group, topics in sorted(current_broker().group_history.groups().items()):
        if not permissions.may_subscribe_group(group):
            continue  # the groups this key may describe, with the topics it may consume
        allowed = may_consume(group)
        shown.append(GroupSummaryBody(group=group, topics=sorted(filter(allowed, topics))))
    return GroupListBody(groups=shown)


@router.get(
    "/v1/groups/<group>/metrics",
    summary="A group's lag, oldest unacked age, in flight and dead letters per minute",
)
def group_metrics(
    group: str,
    minutes: Annotated[int, Query(description=f"The last 1-{MAX_MINUTES} minutes.")] = 60,
    topic: Annotated[str | None, Query(description="Only this topic.")] = None,
) -> GroupMetricsBody:
    service = current_broker().group_history
    service.check(group, minutes, topic)  # 400 before 403
    allowed = may_consume(group)
    if topic is not None and not allowed(topic):
        raise AccessDenied(f"access denied: consume topic {topic} as group {group}")
    history = service.history(group, minutes, allowed, topic=topic)
    return GroupMetricsBody(
        group=group,
        start=history.start,
        end=history.end,
        period_seconds=history.period_s,
        topics=[
            TopicMetricsBody(
                topic=t.topic,
                points=[
                    TopicPointBody(
                        timestamp=p.timestamp,
                        lag=p.lag,
                        oldest_unacked_age_seconds=p.oldest_unacked_age_s,
                        in_flight=p.in_flight,
                    )
                    for p in t.points
                ],
            )
            for t in history.topics
        ],
        dead_letters=[  # the group's, over all its topics: an admin's, like their list
            DeadLetterPointBody(timestamp=stamp, dead_letters=value)
            for stamp, value in history.dead_letters
            if current_principal().permissions.admin
        ],
        truncated=history.truncated,
    )


@router.get("/v1/groups/<group>", summary="Describe a consumer group: offsets and lag per queue")
def describe_group(group: str, topic: Annotated[str | None, Query()] = None) -> GroupBody:
    allowed = may_consume(group)  # only the topics this key may consume as the group
    if topic is not None and not allowed(topic):
        raise AccessDenied(f"access denied: consume topic {topic} as group {group}")
    description = current_broker().consume.describe_group(group, topic)
    return GroupBody(
        group=group,
        queues=[
            GroupQueueBody(**vars(s), lag=s.lag) for s in description.queues if allowed(s.topic)
        ],
        subscriptions=[
            GroupSubscriptionBody(topic=t, filter=s.expression, filter_type=s.filter_type)
            for t, s in sorted(description.subscriptions.items())
            if allowed(t)
        ],
        max_delivery_attempts=current_broker().retries.max_delivery_attempts(group, fresh=True),
        consumers=[  # live consumers and their queues, on topics the key may see
            consumer_body(replace(c, topics={t: f for t, f in c.topics.items() if allowed(t)}))
            for c in current_broker().membership.consumers(group)
            if topic is None or topic in c.topics
        ],
    )
