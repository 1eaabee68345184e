"""Access keys (admin only; see cirrusmq_api.access)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.rules.permissions import Permissions
from cirrusmq_broker.services.access_keys import AccessKey

from ..access import current_principal
from ..schemas import CreatedKeyBody, CreateKeyRequest, KeyBody, KeyListBody, PermissionsBody

router = APIGatewayHttpRouter()


def key_body(key: AccessKey) -> KeyBody:
    return KeyBody(
        access_key=key.access_key,
        description=key.description,
        permissions=PermissionsBody(**key.permissions.to_json()),
        status=key.status,  # type: ignore[arg-type]
        created_timestamp=key.created_timestamp,
    )


@router.post(
    "/v1/keys",
    summary="Create an access key (the only answer that shows its secret)",
    responses={201: {"description": "Created"}},
)
def create_key(request: CreateKeyRequest) -> Response[CreatedKeyBody]:
    permissions = Permissions.from_json(request.permissions.model_dump())
    key, secret = current_broker().access_keys.create(permissions, request.description)
    body = CreatedKeyBody(**key_body(key).model_dump(), secret_key=secret)
    # the secret must not be kept by a browser's or a proxy's cache
    headers = {"Cache-Control": "no-store"}
    return Response(201, "application/json", body=body.model_dump(), headers=headers)


@router.get("/v1/keys", summary="List access keys (never their secrets)")
def list_keys() -> KeyListBody:
    return KeyListBody(keys=[key_body(k) for k in current_broker().access_keys.list()])


@router.post("/v1/keys/<access_key>/disable", summary="Disable an access key")
def disable_key(access_key: str) -> KeyBody:
    caller = current_principal().access_key
    return key_body(current_broker().access_keys.set_enabled(access_key, False, caller=caller))


@router.post("/v1/keys/<access_key>/enable", summary="Enable an access key")
def enable_key(access_key: str) -> KeyBody:
    caller = current_principal().access_key
    return key_body(current_broker().access_keys.set_enabled(access_key, True, caller=caller))


@router.delete("/v1/keys/<access_key>", summary="Delete an access key")
def delete_key(access_key: str):  # noqa: ANN201 (204, no body)
    current_broker().access_keys.delete(access_key, caller=current_principal().access_key)
    return Response(204, None, body=None)
