"""Broker configuration, read from the Lambda environment (names set in template.yaml)."""

from __future__ import annotations

import contextvars
import os
from collections import ChainMap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

ENV_PREFIX = "CIRRUSMQ_"

_function_environment: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "cirrusmq_function_environment", default=None
)


def environment() -> Mapping[str, str]:
    """The variables the broker is configured by: the process's, overlaid with those of the
    function environment being served where a host runs several in one process (the local
    stack: see :func:`function_environment`)."""
    overlay = _function_environment.get()
    return os.environ if overlay is None else ChainMap(dict(overlay), os.environ)


@contextmanager
def function_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Within the block (this thread / task), :func:`environment` reads ``values`` first:
    the local stack serves each stack's functions with that stack's variables, so two stacks
    in one process never configure each other's handlers."""
    token = _function_environment.set(values)
    try:
        yield
    finally:
        _function_environment.reset(token)


@dataclass(frozen=True)
class Settings:
    """Where the broker's resources are and how to reach them."""

    topics_table: str
    """DynamoDB table of topic definitions."""
    log_index_table: str
    """DynamoDB table: one item per stored batch, keyed by queue and base offset."""
    groups_table: str
    """DynamoDB table: one consumer-group state item per (group, topic, queue)."""
    producers_table: str
    """DynamoDB table: idempotency records (producer id + sequence)."""
    queue_heads_table: str
    """DynamoDB table: one head per queue (next offset; closed when the topic is deleted)."""
    bucket: str
    """S3 bucket holding the Parquet batch objects (unless ``batch_bucket`` names another),
    delayed, half and trace objects."""
    receipt_secret: str = ""
    """HMAC key for receipt handles (consume side only)."""
    orphan_grace_seconds: int = 300
    """Batch objects without an index item are swept once older than this."""
    access_keys_table: str = ""
    """DynamoDB table of access keys (secrets encrypted with the KMS key below)."""
    nonces_table: str = ""
    """DynamoDB table of recently seen request nonces (TTL)."""
    secrets_key_id: str = ""
    """KMS key (id, ARN or alias) that encrypts access-key secrets (admin side encrypts)."""
    timers_table: str = ""
    """DynamoDB table of delay items (delayed messages waiting for their due time). Empty:
    no delayed messages."""
    cors_allow_origins: tuple[str, ...] = ()
    """Origins allowed by CORS; none: no CORS headers at all."""
    aws_endpoint_url: str | None = None
    """Endpoint override (the local stack's moto server); None on AWS."""
    aws_region: str | None = None
    """Region override; None uses the environment's default."""
    scheduler_function: str = ""
    """The scheduler function (name or ARN) running the release of delayed messages, woken
    by a send of a message due before its next scheduled run. Empty: no wake (the
    minute's run finds it)."""
    # -- transactions
    transactions_table: str = ""
    """DynamoDB table of transactions, producer registrations and check inboxes."""
    txn_checker_function: str = ""
    """The back-checker function (name or ARN), woken by a half send whose first check
    falls due before its next scheduled run. Empty: no wake (the minute's run asks it)."""
    # -- notification channel (docs/notifications.md)
    connections_table: str = ""
    """DynamoDB table of WebSocket connections and what they wait on. Empty: no channel."""
    websocket_url: str = ""
    """The channel's WebSocket URL clients connect to (``/v1/health`` states it)."""
    websocket_callback_url: str = ""
    """The management API endpoint that posts to the channel's connections."""
    max_waits_per_connection: int = 1000
    """Distinct (group, topic) pairs one WebSocket connection may wait on."""
    max_waits_per_key: int = 20000
    """Distinct (group, topic) pairs the connections of one access key may wait on,
    counted over the connections it opened in the last two connection lifetimes."""
    # -- where topics' batch objects go (docs/deploy.md)
    batch_bucket: str = ""
    """Bucket of the topics' batch objects; empty: ``bucket``."""
    batch_storage: str = "standard"
    """Its kind: ``standard`` (general purpose bucket) or ``express`` (S3 Express One Zone
    directory bucket: retention tier in the key, unordered listings)."""
    leases_on_summary: bool = False
    """Whether a receive may store a lease on its queue's summary (the template's
    ``LeasesOnSummary``; docs/deploy.md): one write per receive instead of a two-item
    transaction. Leases stored there are read and settled either way; off, a redelivery
    in place moves one to an item."""

    def __post_init__(self) -> None:
        # express files the retention tier in the key: the message bucket's lifecycle rules
        # (by tag) would never expire such objects
        if self.batch_storage == "express" and not self.batch_bucket:
            raise ValueError("batch_storage 'express' needs batch_bucket (the directory bucket)")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """Read the settings from ``CIRRUSMQ_*`` environment variables."""
        env = dict(environment() if env is None else env)

        def get(name: str, default: str | None = None) -> str:
            value = env.get(ENV_PREFIX + name, default)
            if value is None:
                raise RuntimeError(f"environment variable {ENV_PREFIX}{name} is not set")
            return value

        return cls(
            topics_table=get("TOPICS_TABLE"),
            log_index_table=get("LOG_INDEX_TABLE"),
            groups_table=get("GROUPS_TABLE"),
            producers_table=get("PRODUCERS_TABLE"),
            queue_heads_table=get("QUEUE_HEADS_TABLE"),
            bucket=get("BUCKET"),
            receipt_secret=get("RECEIPT_SECRET", ""),
            orphan_grace_seconds=int(get("ORPHAN_GRACE_SECONDS", "300")),
            access_keys_table=get("ACCESS_KEYS_TABLE", ""),
            nonces_table=get("NONCES_TABLE", ""),
            secrets_key_id=get("SECRETS_KEY_ID", ""),
            timers_table=get("TIMERS_TABLE", ""),
            scheduler_function=get("SCHEDULER_FUNCTION", ""),
            txn_checker_function=get("TXN_CHECKER_FUNCTION", ""),
            cors_allow_origins=cors_allow_origins(env),
            aws_endpoint_url=env.get(ENV_PREFIX + "AWS_ENDPOINT_URL") or None,
            aws_region=env.get(ENV_PREFIX + "AWS_REGION") or None,
            transactions_table=get("TRANSACTIONS_TABLE", ""),
            connections_table=get("CONNECTIONS_TABLE", ""),
            websocket_url=get("WEBSOCKET_URL", ""),
            websocket_callback_url=get("WEBSOCKET_CALLBACK_URL", ""),
            max_waits_per_connection=int(get("MAX_WAITS_PER_CONNECTION", "1000")),
            max_waits_per_key=int(get("MAX_WAITS_PER_KEY", "20000")),
            batch_bucket=get("BATCH_BUCKET", ""),
            batch_storage=get("BATCH_STORAGE", "") or "standard",
            leases_on_summary=get("LEASES_ON_SUMMARY", "off") == "on",
        )


def cors_allow_origins(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """``CIRRUSMQ_CORS_ALLOW_ORIGINS`` (comma-separated; empty: CORS off)."""
    env = dict(environment() if env is None else env)
    text = env.get(ENV_PREFIX + "CORS_ALLOW_ORIGINS", "")
    return tuple(origin.strip() for origin in text.split(",") if origin.strip())
