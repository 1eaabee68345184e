"""The first admin key of a deployed stack, written with the caller's AWS credentials.

Every API request must be signed, so the first access key cannot come from the API: this
writes it straight into the stack's AccessKeysTable (its secret KMS-encrypted, as the API
would). Needs ``cirrusmq[local]`` (boto3 and the broker package).
"""

from __future__ import annotations

from typing import Any

from ..credentials import Credentials

__all__ = ["BootstrapError", "bootstrap_admin_key"]


class BootstrapError(RuntimeError):
    """The stack's key table could not be found or written."""


def bootstrap_admin_key(
    *,
    stack_name: str | None = None,
    table: str | None = None,
    kms_key: str | None = None,
    region: str | None = None,
    description: str = "bootstrap admin key",
) -> Credentials:
    """Create an admin access key; returns it with its secret (shown this once).

    Give ``stack_name`` (its outputs name the table and the KMS key) or both ``table`` and
    ``kms_key``. AWS credentials and region come from the usual boto3 sources.
    """
    try:
        import boto3
        from cirrusmq_broker.clock import now_ms
        from cirrusmq_broker.rules.permissions import ADMIN
        from cirrusmq_broker.services.access_keys import AccessKeysService
        from cirrusmq_broker.storage.access_keys import AccessKeyStore, SecretCipher
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BootstrapError(
            "this needs the broker package: pip install 'cirrusmq[local]'"
        ) from exc
    session: Any = boto3.session.Session(region_name=region)
    if stack_name:
        table, kms_key = _from_stack(session, stack_name)
    if not table or not kms_key:
        raise BootstrapError("give --stack-name, or both --table and --kms-key")
    service = AccessKeysService(
        store=AccessKeyStore(session.client("dynamodb"), table),
        cipher=SecretCipher(session.client("kms"), kms_key),
        clock=now_ms,
    )
    key, secret = service.create(ADMIN, description)
    return Credentials(key.access_key, secret)


def _from_stack(session: Any, stack_name: str) -> tuple[str | None, str | None]:
    stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    return outputs.get("AccessKeysTableName"), outputs.get("AccessKeySecretsKeyArn")
