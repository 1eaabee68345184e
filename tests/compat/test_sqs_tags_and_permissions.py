"""Queue tags (TagQueue, UntagQueue, ListQueueTags, CreateQueue's tags) and permissions
(AddPermission, RemovePermission) as SQS answers them, through boto3 (JSON) and a signed
query-protocol form, against the local stack over real HTTP."""

from __future__ import annotations

import concurrent.futures
import json
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from .sqs_helpers import (  # noqa: F401 - fixtures
    new_sqs_key,
    query_error,
    query_request,
    queue_name,
    sqs,
    sqs_client,
)

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


def _policy(sqs, url: str) -> dict | None:  # noqa: F811
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes")
    return json.loads(shown["Policy"]) if shown else None


def _statement(sid: str, arn: str, principal, action) -> dict:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Principal": {"AWS": principal},
        "Action": action,
        "Resource": arn,
    }


def test_permissions_are_statements_of_the_queue_policy_as_sqs_writes_them(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """The lifecycle AWS recorded (LocalStack's validated ``test_sqs_permission_lifecycle``)."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.add_permission(
        QueueUrl=url, AWSAccountIds=["000000000000", "668614515564"],
        Actions=["ReceiveMessage"], Label="share",
    )  # fmt: skip
    root = "arn:aws:iam::{}:root".format
    assert _policy(sqs, url) == {
        "Version": "2008-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [
            _statement(
                "share", arn, [root("000000000000"), root("668614515564")], "SQS:ReceiveMessage"
            )
        ],
    }
    sqs.remove_permission(QueueUrl=url, Label="share")
    assert _policy(sqs, url) is None  # the last statement takes the policy with it

    sqs.add_permission(QueueUrl=url, AWSAccountIds=["000000000000"], Actions=["*"], Label="a")
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(
            QueueUrl=url, AWSAccountIds=["668614515564"], Actions=["SendMessage"], Label="a"
        )
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value a for parameter Label is invalid. Reason: Already exists.",
    )
    sqs.add_permission(
        QueueUrl=url, AWSAccountIds=["000000000000"],
        Actions=["SendMessage", "DeleteMessage"], Label="b",
    )  # fmt: skip
    sqs.remove_permission(QueueUrl=url, Label="a")
    assert _policy(sqs, url)["Statement"] == [
        _statement("b", arn, root("000000000000"), ["SQS:SendMessage", "SQS:DeleteMessage"])
    ]
    sqs.remove_permission(QueueUrl=url, Label="b")
    with pytest.raises(ClientError) as caught:
        sqs.remove_permission(QueueUrl=url, Label="b")
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value b for parameter Label is invalid. Reason: can't find label.",
    )
    assert _policy(sqs, url) is None


@pytest.mark.parametrize(
    ("accounts", "actions", "label", "code", "message"),
    [
        (["111111111111"], [], "x", "MissingParameter",
         "The request must contain the parameter Actions."),
        ([], ["ReceiveMessage"], "x", "InvalidParameterValue",
         "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify."),
        (["not-an-account"], ["ReceiveMessage"], "x", "InvalidParameterValue",
         "Value [not-an-account] for parameter PrincipalId is invalid. Reason: Unable to verify."),
        (["111111111111"], ["RemovePermission"], "x", "InvalidParameterValue",
         "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the "
         "queue owner is allowed to invoke this action."),
        (["111111111111"], ["ReceiveMessage"], "no spaces", "InvalidParameterValue",
         "Value no spaces for parameter Label is invalid. Reason: Must be 1-80 alphanumeric "
         "characters, hyphens or underscores."),
        (["111111111111"], ["ReceiveMessage"], "l" * 81, "InvalidParameterValue", None),
        (["111111111111"], ["ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes",
          "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage",
          "SendMessage"], "x", "OverLimit", "8 Actions were found, maximum allowed is 7."),
    ],
)  # fmt: skip
def test_a_refused_permission_stores_nothing(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    accounts,
    actions,
    label,
    code,
    message,
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=accounts, Actions=actions, Label=label)
    assert _error(caught)[0] == code
    if message is not None:
        assert _error(caught)[1] == message
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == (
        403 if code == "OverLimit" else 400
    )
    assert _policy(sqs, url) is None


def test_add_permission_adds_to_a_policy_set_before_and_refuses_one_that_is_not_json(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    mine = {"Version": "2012-10-17", "Statement": {"Sid": "mine", "Effect": "Deny"}}
    url = sqs.create_queue(QueueName=queue_name, Attributes={"Policy": json.dumps(mine)})[
        "QueueUrl"
    ]
    sqs.add_permission(QueueUrl=url, AWSAccountIds=["111111111111"], Actions=["*"], Label="x")
    policy = _policy(sqs, url)
    assert policy["Version"] == "2012-10-17"
    assert [s["Sid"] for s in policy["Statement"]] == ["mine", "x"]

    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "not json"})
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=["111111111111"], Actions=["*"], Label="y")
    assert _error(caught)[0] == "InvalidParameterValue"
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"] == {
        "Policy": "not json"
    }


def test_permissions_through_the_query_protocol(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    path = f"/000000000000/{queue_name}"
    status, _ = query_request(
        cirrusmq_stack,
        [("Action", "AddPermission"), ("Label", "q"), ("AWSAccountId.1", "111111111111"),
         ("AWSAccountId.2", "222222222222"), ("ActionName.1", "SendMessage")],
        path=path,
    )  # fmt: skip
    assert status == 200
    (statement,) = _policy(sqs, url)["Statement"]
    assert statement["Principal"]["AWS"] == [
        "arn:aws:iam::111111111111:root",
        "arn:aws:iam::222222222222:root",
    ]
    status, text = query_request(
        cirrusmq_stack, [("Action", "RemovePermission"), ("Label", "nope")], path=path
    )
    assert (status, query_error(text)) == (
        400,
        (
            "InvalidParameterValue",
            "Value nope for parameter Label is invalid. Reason: can't find label.",
        ),
    )


def test_a_permission_grants_no_access_key_anything(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    """The policy is kept, not enforced: a key without CirrusMQ permissions on the queue stays
    refused, whatever the statements say; and only an admin key edits them."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.add_permission(QueueUrl=url, AWSAccountIds=["000000000000"], Actions=["*"], Label="all")
    outsider = sqs_client(cirrusmq_stack, *new_sqs_key(cirrusmq_stack, {"publish": ["other"]}))
    for attempt in (
        lambda: outsider.receive_message(QueueUrl=url),
        lambda: outsider.send_message(QueueUrl=url, MessageBody="x"),
        lambda: outsider.add_permission(
            QueueUrl=url, AWSAccountIds=["000000000000"], Actions=["*"], Label="mine"
        ),
        lambda: outsider.remove_permission(QueueUrl=url, Label="all"),
    ):
        with pytest.raises(ClientError) as caught:
            attempt()
        assert _error(caught)[0] == "AccessDenied"
    assert [s["Sid"] for s in _policy(sqs, url)["Statement"]] == ["all"]


def test_permissions_of_an_unknown_queue(sqs) -> None:  # noqa: F811
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(
            QueueUrl=UNKNOWN, Label="x", AWSAccountIds=["111111111111"], Actions=["SendMessage"]
        )
    assert _error(caught)[0] == "AWS.SimpleQueueService.NonExistentQueue"


def test_changes_made_at_once_are_all_kept(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    """Permissions, tags, attributes and a purge at once, from 12 clients: none is lost (each
    is a read-modify-write of one item, fenced on the version it read)."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    clients = [sqs_client(cirrusmq_stack) for _ in range(12)]

    def one(n: int) -> None:
        client = clients[n]
        if n < 6:
            client.add_permission(
                QueueUrl=url, AWSAccountIds=["111111111111"], Actions=["*"], Label=f"p{n}"
            )
        elif n < 10:
            client.tag_queue(QueueUrl=url, Tags={f"t{n}": str(n)})
        elif n == 10:
            client.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7"})
        else:
            client.purge_queue(QueueUrl=url)

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(one, range(12)))
    assert sorted(s["Sid"] for s in _policy(sqs, url)["Statement"]) == [f"p{n}" for n in range(6)]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {f"t{n}": str(n) for n in range(6, 10)}
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])
    assert shown["Attributes"]["DelaySeconds"] == "7"


def test_a_policy_nested_past_the_parser_is_refused_not_a_500(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "[" * 4000 + "]" * 4000})
    for attempt in (
        lambda: sqs.add_permission(
            QueueUrl=url, AWSAccountIds=["111111111111"], Actions=["*"], Label="x"
        ),
        lambda: sqs.remove_permission(QueueUrl=url, Label="x"),
    ):
        with pytest.raises(ClientError) as caught:
            attempt()
        assert _error(caught)[0] == "InvalidParameterValue"


def test_sqs_s_policy_quotas_hold(sqs, queue_name) -> None:  # noqa: F811
    """20 statements, 50 principals, 8,192 bytes (SQS's policy quotas): past one, OverLimit
    (403) and the policy stays as it was; SetQueueAttributes takes no longer Policy."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    accounts = [f"{n:012d}" for n in range(60)]
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=accounts[:51], Actions=["*"], Label="x")
    assert _error(caught)[0] == "OverLimit"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    for n in range(20):
        sqs.add_permission(
            QueueUrl=url, AWSAccountIds=accounts[2 * n : 2 * n + 2], Actions=["*"], Label=f"s{n}"
        )
    before = _policy(sqs, url)
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=accounts[:1], Actions=["*"], Label="s20")
    assert _error(caught)[0] == "OverLimit"
    sqs.remove_permission(QueueUrl=url, Label="s0")
    with pytest.raises(ClientError) as caught:  # 38 principals kept + 13
        sqs.add_permission(QueueUrl=url, AWSAccountIds=accounts[40:53], Actions=["*"], Label="y")
    assert _error(caught)[0] == "OverLimit"
    assert len(_policy(sqs, url)["Statement"]) == len(before["Statement"]) - 1

    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "x" * 8193})
    assert _error(caught)[0] == "InvalidAttributeValue"
    assert len(_policy(sqs, url)["Statement"]) == 19
