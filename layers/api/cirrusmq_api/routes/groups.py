"""Consumer group inspection."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import AccessDenied

from ..access import may_consume
from ..schemas import GroupBody, GroupQueueBody, GroupSubscriptionBody, consumer_body

router = APIGatewayHttpRouter()


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
            GroupSubscriptionBody(topic=t, filter=f)
            for t, f in sorted(description.subscriptions.items())
            if allowed(t)
        ],
        max_delivery_attempts=current_broker().retries.max_delivery_attempts(group, fresh=True),
        consumers=[  # live consumers and their queues, on topics the key may see
            consumer_body(replace(c, topics={t: f for t, f in c.topics.items() if allowed(t)}))
            for c in current_broker().membership.consumers(group)
            if topic is None or topic in c.topics
        ],
    )
