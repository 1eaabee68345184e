"""Queue tags (TagQueue, UntagQueue, ListQueueTags, CreateQueue's tags) and permissions
(AddPermission, RemovePermission) as SQS answers them, through boto3 (JSON) and a signed
query-protocol form, against the local stack over real HTTP."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from .sqs_helpers import query_error, query_request, queue_name, sqs  # noqa: F401 - fixtures

UNKNOWN = "http://127.0.0.1/000000000000/no-such-queue-here"
NS = {"q": "http://queue.amazonaws.com/doc/2012-11-05/"}


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = exc.value.response["Error"]
    return error["Code"], error["Message"]


def test_tags_are_kept_with_the_queue(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name, tags={"team": "billing", "env": "dev"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "billing", "env": "dev"}
    sqs.tag_queue(QueueUrl=url, Tags={"env": "prod", "cost": "42"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "not-there"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "prod", "cost": "42"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["env", "cost"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_tags_through_the_query_protocol(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    sqs.create_queue(QueueName=queue_name)
    path = f"/000000000000/{queue_name}"
    status, _ = query_request(
        cirrusmq_stack,
        [("Action", "TagQueue"), ("Tag.1.Key", "a"), ("Tag.1.Value", "1 < 2")],
        path=path,
    )
    assert status == 200
    status, text = query_request(cirrusmq_stack, [("Action", "ListQueueTags")], path=path)
    assert status == 200
    tags = ET.fromstring(text).findall(".//q:Tag", NS)
    assert [
        (t.findtext("q:Key", namespaces=NS), t.findtext("q:Value", namespaces=NS)) for t in tags
    ] == [("a", "1 < 2")]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.list_queue_tags(QueueUrl=UNKNOWN),
        lambda s: s.tag_queue(QueueUrl=UNKNOWN, Tags={"t": "v"}),
        lambda s: s.untag_queue(QueueUrl=UNKNOWN, TagKeys=["t"]),
    ],
)
def test_tags_of_an_unknown_queue(sqs, call) -> None:  # noqa: F811
    with pytest.raises(ClientError) as caught:
        call(sqs)
    assert _error(caught) == (
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
    )


def test_tag_limits_are_sqs_s_and_a_refused_change_stores_nothing(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name, tags={"k": "v"})["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.tag_queue(QueueUrl=url, Tags={})
    assert _error(caught) == ("MissingParameter", "The request must contain the parameter Tags.")
    with pytest.raises(ClientError) as caught:
        sqs.tag_queue(QueueUrl=url, Tags={f"k{i}": "v" for i in range(50)})
    assert _error(caught) == (
        "InvalidParameterValue",
        f"Too many tags added for queue {queue_name}.",
    )
    with pytest.raises(ClientError) as caught:
        sqs.tag_queue(QueueUrl=url, Tags={"x" * 129: "v"})
    assert _error(caught)[0] == "InvalidParameterValue"
    with pytest.raises(ClientError) as caught:
        sqs.tag_queue(QueueUrl=url, Tags={"k2": "v" * 257})
    assert _error(caught)[0] == "InvalidParameterValue"
    with pytest.raises(ClientError) as caught:
        sqs.untag_queue(QueueUrl=url, TagKeys=[])
    assert _error(caught) == (
        "InvalidParameterValue",
        "Tag keys must be between 1 and 128 characters in length.",
    )
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"k": "v"}
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName=f"{queue_name}-2", tags={f"k{i}": "v" for i in range(51)})
    assert _error(caught)[0] == "InvalidParameterValue"
    with pytest.raises(ClientError) as caught:
        sqs.get_queue_url(QueueName=f"{queue_name}-2")


def test_add_permission_is_refused_and_remove_permission_finds_no_label(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(
            QueueUrl=url, Label="share", AWSAccountIds=["111111111111"], Actions=["SendMessage"]
        )
    assert _error(caught)[0] == "AWS.SimpleQueueService.UnsupportedOperation"
    with pytest.raises(ClientError) as caught:
        sqs.remove_permission(QueueUrl=url, Label="share")
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value share for parameter Label is invalid. Reason: can't find label on existing policy.",
    )
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(
            QueueUrl=UNKNOWN, Label="x", AWSAccountIds=["111111111111"], Actions=["SendMessage"]
        )
    assert _error(caught)[0] == "AWS.SimpleQueueService.NonExistentQueue"
