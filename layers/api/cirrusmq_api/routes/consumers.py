"""Consumer registration: heartbeats and deregistration (they drive queue allocation and
orderly consumption's queue locks)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import AccessDenied

from ..access import acting_key, current_principal
from ..schemas import ConsumerBody, HeartbeatRequest, consumer_body

router = APIGatewayHttpRouter()


@router.post(
    "/v1/groups/<group>/heartbeat",
    summary="Register a consumer with its group (or keep it registered); its queues",
)
def heartbeat(group: str, request: HeartbeatRequest) -> ConsumerBody:
    principal = current_principal()
    permissions = principal.permissions
    for topic in request.subscriptions:
        if not permissions.may_subscribe(group, topic):
            raise AccessDenied(f"access denied: consume topic {topic} as group {group}")
    status = current_broker().membership.heartbeat(
        group,
        request.client_id,
        request.subscriptions,
        filter_types=request.filter_types,
        orderly=request.orderly,
        heartbeat_timeout_seconds=request.heartbeat_timeout_seconds,
        access_key=principal.access_key,
        admin=permissions.admin,
    )
    return consumer_body(status)


@router.delete(
    "/v1/groups/<group>/consumers/<client_id>",
    summary="Deregister a consumer and release its queue locks at once",
)
def deregister(group: str, client_id: str):  # noqa: ANN201 (204, no body)
    permissions = current_principal().permissions
    current_broker().membership.deregister(
        group,
        unquote(client_id),  # '@' may come as %40
        may_subscribe=lambda topic: permissions.may_subscribe(group, topic),
        access_key=acting_key(),
    )
    return Response(204, None, body=None)
