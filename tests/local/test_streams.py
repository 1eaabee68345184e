"""The local stack's DynamoDB stream event sources behave as Lambda's event source mapping:
a function that reports batch item failures gets the records from the earliest failed one
again, at most ``MaximumRetryAttempts`` times; a failed run gets its whole batch again."""

from __future__ import annotations

from typing import Any

from cirrusmq_local.streams import StreamPoller, StreamSource


class FakeStreams:
    """One table, one shard holding ``records`` (all returned by the first read)."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._records = records

    def describe_table(self, TableName: str) -> dict:  # noqa: N803 - boto3's names
        return {"Table": {"LatestStreamArn": "arn:stream"}}

    def describe_stream(self, StreamArn: str) -> dict:  # noqa: N803
        return {"StreamDescription": {"Shards": [{"ShardId": "s-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict:
        return {"ShardIterator": "it-0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803
        records, self._records = self._records, []
        return {"Records": records, "NextShardIterator": "it-1"}


def record(sequence: str) -> dict[str, Any]:
    return {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": sequence}}


def poll(invoke: Any, retries: int, records: list[dict[str, Any]]) -> None:
    fake = FakeStreams(records)
    source = StreamSource(
        "Fn.Event", "table", invoke, retry_attempts=retries, report_batch_item_failures=True
    )
    poller = StreamPoller(fake, fake, [source]).start(background=False)
    poller.poll_once()


def test_reported_items_are_run_again_from_the_earliest_up_to_the_retry_limit() -> None:
    batches: list[list[str]] = []

    def invoke(event: dict) -> dict:
        batches.append([r["dynamodb"]["SequenceNumber"] for r in event["Records"]])
        return {"batchItemFailures": [{"itemIdentifier": "3"}, {"itemIdentifier": "2"}]}

    poll(invoke, 2, [record("1"), record("2"), record("3")])
    assert batches == [["1", "2", "3"], ["2", "3"], ["2", "3"]]


def test_a_failed_run_gets_its_whole_batch_again() -> None:
    batches: list[int] = []

    def invoke(event: dict) -> dict:
        batches.append(len(event["Records"]))
        if len(batches) == 1:
            raise RuntimeError("timed out")
        return {"batchItemFailures": []}

    poll(invoke, 2, [record("1"), record("2")])
    assert batches == [2, 2]
