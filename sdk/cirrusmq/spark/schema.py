"""The data source's columns (no heavy imports: the planner process loads this)."""

SCHEMA_DDL = (
    "topic STRING, queue INT, offset BIGINT, message_id STRING, keys ARRAY<STRING>, "
    "tag STRING, properties MAP<STRING, STRING>, body BINARY, message_group STRING, "
    "born_timestamp TIMESTAMP, stored_timestamp TIMESTAMP, delivery_timestamp TIMESTAMP, "
    "origin_topic STRING, origin_queue INT, origin_offset BIGINT, reconsume_count INT, "
    "dead_letter_reason STRING, transaction_id STRING, producer_id STRING, "
    "producer_sequence BIGINT, body_bucket STRING, body_key STRING, body_size BIGINT, "
    "body_sha256 STRING"
)
"""The data source's columns (Spark DDL), in order. The ``body_*`` columns are a large
message's pointer (its body is an S3 object; ``body`` holds the SQS Extended Client's pointer
JSON unless the option ``largeBodies`` is ``read``), null for an inline body."""
