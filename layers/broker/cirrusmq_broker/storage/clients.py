"""Lazily created, shared boto3 clients (never at import time)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

from ..settings import Settings

CallObserver = Callable[[str, str, dict[str, Any]], None]
"""Called with (service, operation, request params) before every AWS call (benchmarks)."""

_lock = threading.Lock()
_clients: dict[tuple[str, str | None, str | None], Any] = {}
_observers: list[CallObserver] = []
_config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=64)


def aws_client(service: str, settings: Settings) -> Any:
    """A boto3 client for ``service`` at the settings' endpoint, created once per process."""
    key = (service, settings.aws_endpoint_url, settings.aws_region)
    with _lock:
        client = _clients.get(key)
        if client is None:
            extra: dict[str, Any] = {}
            if settings.aws_endpoint_url:
                # The local stack's moto server accepts any credentials.
                extra = {
                    "endpoint_url": settings.aws_endpoint_url,
                    "aws_access_key_id": "cirrusmq-local",
                    "aws_secret_access_key": "cirrusmq-local",
                }
            client = boto3.session.Session().client(
                service, region_name=settings.aws_region or "us-east-1", config=_config, **extra
            )
            client.meta.events.register("before-parameter-build.*.*", _notify)
            _clients[key] = client
        return client


def observe_calls(observer: CallObserver) -> Callable[[], None]:
    """Register an observer of every AWS call; returns a function that removes it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


def _notify(model: Any, params: dict[str, Any], **_: Any) -> None:
    for observer in list(_observers):
        observer(model.service_model.service_name, model.name, params)
