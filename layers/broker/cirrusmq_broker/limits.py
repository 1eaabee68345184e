"""Explicit limits of the service (documented in docs/http-api.md)."""

from __future__ import annotations

MAX_BODY_BYTES = 4 * 1024 * 1024
"""A message body: 1 byte to 4 MiB."""
MAX_LARGE_BODY_BYTES = 2 * 1024 * 1024 * 1024
"""A large body (stored as its own S3 object, uploaded by the producer): up to 2 GiB."""
LARGE_BODY_PART_BYTES = 64 * 1024 * 1024
"""The part size of a large body's multipart upload (the last part may be smaller)."""
LARGE_BODY_URL_SECONDS = 3600
"""How long a presigned upload or download URL of a large body is valid."""
LARGE_BODY_SEND_WINDOW_SECONDS = 24 * 3600
"""A send names a large body granted at most this long before: the body's lifecycle tier
counts from its upload, so a later message could outlive it."""
LARGE_BODY_MIN_RETENTION_HOURS = 14 * 24
"""A large body is kept at least as long as a dead-letter topic keeps its copies."""
MAX_REQUEST_BYTES = 6 * 1024 * 1024
"""A request or a response: at most 6 MiB (Lambda's synchronous payload limit)."""
MAX_MESSAGES_PER_SEND = 1000
MAX_RECEIVE_MESSAGES = 1000
DEFAULT_RECEIVE_MESSAGES = 32
MIN_INVISIBLE_SECONDS = 10
MAX_INVISIBLE_SECONDS = 12 * 3600
DEFAULT_INVISIBLE_SECONDS = 60
MAX_WAIT_SECONDS = 20
MAX_ACK_HANDLES = 1000
MAX_RECEIPT_HANDLE_CHARS = 4096
"""A handle the service makes is under 1,100 characters; results echo each handle, so
1,000 of these stay well within a response."""
MIN_QUEUES, MAX_QUEUES, DEFAULT_QUEUES = 1, 64, 8
MIN_RETENTION_HOURS, MAX_RETENTION_HOURS, DEFAULT_RETENTION_HOURS = 1, 2160, 72
MAX_INFLIGHT_PER_QUEUE = 5_000
"""Offsets between committed and cursor per (group, queue): beyond it the queue waits for acks."""
MAX_LEASES_PER_QUEUE = 2_000
"""Open leases per (group, queue); with the bound above it keeps the query of a queue's lease
items (made when a deadline may have passed or flow control may bind) to about one page."""
MAX_TAG_CHARS = 128
MAX_KEYS = 32
MAX_KEY_CHARS = 128
MAX_PROPERTIES = 64
MAX_PROPERTY_CHARS = 1024
MAX_MESSAGE_ID_CHARS = 128
MAX_PRODUCER_ID_CHARS = 128
IDEMPOTENCY_WINDOW_SECONDS = 7 * 24 * 3600
"""How long a producer id + sequence is remembered."""
