"""Wire input Python cannot turn into numbers or map keys, in process: the SQS adapter
answers it with a 4xx error, never a 5xx."""

from __future__ import annotations

import json

import pytest
from cirrusmq_api.compat.sqs import protocol
from cirrusmq_api.compat.sqs.context import int_param
from cirrusmq_api.compat.sqs.errors import SqsError
from cirrusmq_api.compat.sqs.queue_attributes import redrive_policy


@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan"), 1e400, 2.5])
def test_numbers_python_cannot_make_an_int_of_are_invalid(number) -> None:
    params = json.loads(json.dumps({"MaxNumberOfMessages": number}))
    with pytest.raises(SqsError) as caught:
        int_param(params, "MaxNumberOfMessages", 1, 10)
    assert caught.value.code == "InvalidParameterValue"


@pytest.mark.parametrize(
    "fields",
    [
        {"Attribute.1.Name.x": "VisibilityTimeout", "Attribute.1.Value": "5"},
        {"MessageAttribute.1.Name.a.b": "k", "MessageAttribute.1.Value.StringValue": "v"},
        {"Tag.1.Key.z": "k", "Tag.1.Value": "v"},
    ],
)
def test_a_query_map_entry_whose_name_is_nested_is_malformed(fields) -> None:
    with pytest.raises(SqsError) as caught:
        protocol.query_params(fields)
    assert caught.value.code == "MalformedQueryString"


@pytest.mark.parametrize("count", ["Infinity", "-Infinity", "NaN", "1e400", "2.5", "true"])
def test_a_redrive_policy_whose_count_is_no_integer_is_invalid(count) -> None:
    arn = "arn:aws:sqs:us-east-1:000000000000:dlq"
    with pytest.raises(SqsError) as caught:
        redrive_policy(f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": {count}}}')
    assert caught.value.code == "InvalidParameterValue"
