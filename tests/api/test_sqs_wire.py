"""The SQS adapter's wire pieces in process: SigV4 verification against botocore's own
signer, the query protocol's flattened lists and XML answers (parsed with the service model
of botocore 1.31.80, the last that speaks query to SQS, from .venv-sqs-query), the MD5 of
message attributes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.model import ServiceModel
from botocore.parsers import QueryParser
from cirrusmq_api.compat.sqs import protocol, sigv4
from cirrusmq_api.compat.sqs.digests import md5_of_attributes
from cirrusmq_api.compat.sqs.errors import SqsError
from cirrusmq_broker.rules.permissions import Permissions

KEY, SECRET = "AKEXAMPLE", "secret-example"
QUERY_VENV = Path(
    os.environ.get("CIRRUSMQ_SQS_QUERY_VENV", Path(__file__).parents[2] / ".venv-sqs-query")
)


def _signed(url: str, body: bytes, region: str = "sa-east-1") -> AWSRequest:
    request = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(Credentials(KEY, SECRET), "sqs", region).add_auth(request)
    return request


def _verify(request: AWSRequest, body: bytes | None = None, now_ms: int | None = None):
    parts = urlsplit(request.url)
    return sigv4.verify(
        method="POST",
        raw_path=parts.path or "/",
        raw_query=parts.query,
        headers={k.lower(): v for k, v in request.headers.items()} | {"host": parts.netloc},
        body=request.body if body is None else body,
        lookup=lambda key: (SECRET, Permissions(admin=True)) if key == KEY else None,
        now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
    )


def test_botocore_signatures_verify_with_any_region_path_and_query() -> None:
    body = b"Action=ListQueues&QueueNamePrefix=a%20b"
    for url in ("http://h:1/", "http://h:1/000000000000/q-1?x=1&a=b%2Fc"):
        assert _verify(_signed(url, body)).access_key == KEY


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"body": b"Action=DeleteQueue"}, "SignatureDoesNotMatch"),
        ({"skew_ms": 16 * 60_000}, "SignatureDoesNotMatch"),
        ({"skew_ms": -16 * 60_000}, "SignatureDoesNotMatch"),
    ],
)
def test_tampered_or_stale_requests_are_refused(change, code) -> None:
    request = _signed("http://h:1/", b"Action=ListQueues")
    if "skew_ms" in change:  # the service's clock, that far from the signing time
        change = {"now_ms": int(time.time() * 1000) + change["skew_ms"]}
    with pytest.raises(SqsError) as caught:
        _verify(request, **change)
    assert caught.value.code == code and caught.value.status == 403


def test_unknown_keys_and_missing_signatures() -> None:
    request = _signed("http://h:1/", b"Action=ListQueues")
    request.headers["Authorization"] = request.headers["Authorization"].replace(KEY, "OTHER")
    with pytest.raises(SqsError) as caught:
        _verify(request)
    assert caught.value.code == "InvalidClientTokenId"
    del request.headers["Authorization"]
    with pytest.raises(SqsError) as caught:
        _verify(request)
    assert caught.value.code == "MissingAuthenticationToken"


def test_query_lists_and_maps_become_the_json_shape() -> None:
    fields = {
        "QueueUrl": "u",
        "SendMessageBatchRequestEntry.2.Id": "b",
        "SendMessageBatchRequestEntry.2.MessageBody": "two",
        "SendMessageBatchRequestEntry.1.Id": "a",
        "SendMessageBatchRequestEntry.1.MessageBody": "one",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "k",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "String",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "v",
        "AttributeName.1": "All",
    }
    assert protocol.query_params(fields) == {
        "QueueUrl": "u",
        "Entries": [
            {
                "Id": "a",
                "MessageBody": "one",
                "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
            },
            {"Id": "b", "MessageBody": "two"},
        ],
        "AttributeNames": ["All"],
    }


def test_attribute_digest_matches_a_known_value() -> None:
    # computed by hand from SQS's algorithm: len+name, len+type, 1, len+value
    import hashlib
    import struct

    def part(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    expected = hashlib.md5(part(b"a") + part(b"String") + b"\x01" + part(b"x")).hexdigest()
    assert md5_of_attributes({"a": {"DataType": "String", "StringValue": "x"}}) == expected


def _query_model() -> ServiceModel:
    found = sorted(QUERY_VENV.glob("lib/python*/site-packages/botocore/data/sqs/*/service-2.json"))
    if not found:
        if os.environ.get("CI"):
            raise RuntimeError(f"{QUERY_VENV} is missing: make sqs-query-clients")
        pytest.skip(f"{QUERY_VENV} is missing: make sqs-query-clients")
    model = ServiceModel(json.loads(found[-1].read_text()), "sqs")
    assert model.protocol == "query"
    return model


TASK = {
    "TaskHandle": "h-1",
    "Status": "RUNNING",
    "SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq",
    "DestinationArn": "arn:aws:sqs:us-east-1:000000000000:q",
    "MaxNumberOfMessagesPerSecond": 50,
    "ApproximateNumberOfMessagesMoved": 3,
    "ApproximateNumberOfMessagesToMove": 7,
    "FailureReason": "none",
    "StartedTimestamp": 1_790_000_000_000,
}


@pytest.mark.parametrize(
    "action, result",
    [
        ("StartMessageMoveTask", {"TaskHandle": "h-1"}),
        ("ListMessageMoveTasks", {"Results": [TASK, {**TASK, "TaskHandle": "h-2"}]}),
        ("ListMessageMoveTasks", {"Results": [TASK]}),
        ("CancelMessageMoveTask", {"ApproximateNumberOfMessagesMoved": 3}),
    ],
)
def test_move_task_answers_parse_with_the_query_model(action: str, result: dict) -> None:
    operation = _query_model().operation_model(action)
    answer = protocol.answer("query", action, result)
    response = {"body": answer["body"].encode(), "headers": answer["headers"], "status_code": 200}
    parsed = QueryParser().parse(response, operation.output_shape)
    parsed.pop("ResponseMetadata")
    assert parsed == result


def test_an_sqs_receipt_handle_carries_its_receive_time() -> None:
    from cirrusmq_api.compat.sqs import receipts

    handle = receipts.issue("cGF5bG9hZA.c2ln", 1_790_000_000_123)
    assert receipts.split(handle) == ("cGF5bG9hZA.c2ln", 1_790_000_000_123)
    assert receipts.broker_handle(handle) == "cGF5bG9hZA.c2ln"
    assert receipts.split("cGF5bG9hZA.c2ln") == ("cGF5bG9hZA.c2ln", None)  # no time: no limit
    assert receipts.split("forged~") == ("forged~", None)
    receipts.check_total_visibility(handle, 43_200, 1_790_000_000_123)
    with pytest.raises(SqsError) as caught:
        receipts.check_total_visibility(handle, 43_200, 1_790_000_000_124)
    assert caught.value.code == "InvalidParameterValue"
