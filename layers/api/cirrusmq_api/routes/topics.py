"""Topic management routes."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker

from ..access import current_principal
from ..convert import topic_body
from ..schemas import (
    CreateTopicRequest,
    TopicBody,
    TopicDescriptionBody,
    TopicListBody,
    UpdateTopicRequest,
)

router = APIGatewayHttpRouter()


@router.post("/v1/topics", summary="Create a topic", responses={201: {"description": "Created"}})
def create_topic(request: CreateTopicRequest) -> Response[TopicBody]:
    topic = current_broker().admin.create_topic(
        request.name,
        queues=request.queues,
        message_type=request.message_type,
        retention_hours=request.retention_hours,
        trace=request.trace,
    )
    return Response(201, "application/json", body=topic_body(topic))


@router.get("/v1/topics", summary="List the topics this access key may see")
def list_topics() -> TopicListBody:
    permissions = current_principal().permissions
    topics = [t for t in current_broker().admin.list_topics() if permissions.may_see_topic(t.name)]
    return TopicListBody(topics=[topic_body(t) for t in topics])


@router.get("/v1/topics/<topic>", summary="Describe a topic with its per-queue offsets")
def describe_topic(topic: str) -> TopicDescriptionBody:
    description = current_broker().admin.describe_topic(topic)
    return TopicDescriptionBody(
        **topic_body(description.topic),
        queue_offsets=[vars(o) for o in description.queue_offsets],
    )


@router.patch("/v1/topics/<topic>", summary="Update a topic (message trace on or off)")
def update_topic(topic: str, request: UpdateTopicRequest) -> TopicBody:
    return TopicBody(**topic_body(current_broker().admin.update_topic(topic, trace=request.trace)))


@router.delete("/v1/topics/<topic>", summary="Delete a topic (its data is purged later)")
def delete_topic(topic: str):  # noqa: ANN201 (204, no body)
    current_broker().admin.delete_topic(topic)
    return Response(204, None, body=None)
