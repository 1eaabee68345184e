"""Posts to WebSocket connections, and closes them, through the API Gateway management API."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .dynamo import error_code

__all__ = ["ConnectionPoster"]

GONE = ("GoneException", "410")


class ConnectionPoster:
    """``PostToConnection`` on one WebSocket API stage (its callback URL)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def post(self, connection_id: str, data: bytes) -> bool:
        """Send ``data``; False if the connection is gone (410), else True."""
        try:
            self._client.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if error_code(exc) in GONE or status == "410":
                return False
            raise
        return True

    def close(self, connection_id: str) -> bool:
        """Close the connection (``DeleteConnection``); False if it was gone already."""
        try:
            self._client.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if error_code(exc) in GONE or status == "410":
                return False
            raise
        return True


def management_client(callback_url: str, region: str | None, *, local: bool) -> Any:
    """A boto3 ``apigatewaymanagementapi`` client for the stage at ``callback_url`` (its
    calls are observed like every broker client's; ``local``: dummy credentials)."""
    import boto3

    from .clients import _config, _notify, translate_retriable_errors

    extra: dict[str, Any] = {}
    if local:
        extra = {"aws_access_key_id": "cirrusmq-local", "aws_secret_access_key": "cirrusmq-local"}
    client = boto3.session.Session().client(
        "apigatewaymanagementapi",
        endpoint_url=callback_url,
        region_name=region or "us-east-1",
        config=_config,
        **extra,
    )
    translate_retriable_errors(client)
    client.meta.events.register("before-parameter-build.*.*", _notify)
    return client
