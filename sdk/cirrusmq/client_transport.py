"""The transport a client talks through, and whether the client owns it."""

from __future__ import annotations

from .credentials import Credentials
from .transport import RetryPolicy, Transport

__all__ = ["client_transport"]


def client_transport(
    transport: Transport | None,
    endpoint: str,
    credentials: Credentials | None,
    request_timeout_s: float,
    max_attempts: int,
) -> tuple[Transport, bool]:
    """``(transport, owned)``: the ``transport`` given (shared: the caller closes it), else a
    new one with these settings that the client closes when it closes."""
    if transport is not None:
        return transport, False
    retry = RetryPolicy(max_attempts=max_attempts)
    return Transport(endpoint, credentials, request_timeout_s=request_timeout_s, retry=retry), True
