"""AddPermission and RemovePermission: statements of the queue's ``Policy``, as SQS writes them.

AddPermission adds a statement (``Sid`` = the label) allowing the named AWS accounts the named
actions on the queue; RemovePermission takes the statement of a label away, and the policy
with its last statement. The policy is the one ``SetQueueAttributes`` sets and
``GetQueueAttributes`` shows: like a policy set there, it is kept, not enforced. A CirrusMQ
deployment knows access keys, not AWS accounts: what a key may do is its CirrusMQ permissions,
and an account a statement names gets nothing (a grant that cannot apply fails closed).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .context import Call, list_param, str_param
from .errors import SqsError, invalid_parameter, missing_parameter
from .naming import QueueName

POLICY = "Policy"
POLICY_VERSION = "2008-10-17"
"""The policy language version SQS writes in the policy AddPermission creates."""
ACTIONS = (
    "*",
    "ChangeMessageVisibility",
    "DeleteMessage",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListDeadLetterSourceQueues",
    "PurgeQueue",
    "ReceiveMessage",
    "SendMessage",
)
"""What AddPermission may grant (the others only the queue's owner may call)."""
MAX_ACTIONS = 7
MAX_STATEMENTS = 20
MAX_PRINCIPALS = 50
MAX_POLICY_BYTES = 8_192
"""SQS's quotas of one queue policy: statements, principals, bytes."""
LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
ACCOUNT_ID = re.compile(r"[0-9]{12}")


def add_permission(call: Call, queue: QueueName, params: dict[str, Any]) -> dict[str, Any]:
    label, accounts, actions = _checked(params)
    arn = queue.arn(call.region)
    statement = {
        "Sid": label,
        "Effect": "Allow",
        "Principal": {"AWS": _one_or_list([f"arn:aws:iam::{a}:root" for a in accounts])},
        "Action": _one_or_list([f"SQS:{a}" for a in actions]),
        "Resource": arn,
    }

    def change(attributes: dict[str, str] | None) -> dict[str, str]:
        attributes = attributes or {}
        policy = _policy(attributes) or {
            "Version": POLICY_VERSION,
            "Id": f"{arn}/SQSDefaultPolicy",
            "Statement": [],
        }
        if any(s.get("Sid") == label for s in policy["Statement"]):
            raise invalid_parameter(
                f"Value {label} for parameter Label is invalid. Reason: Already exists."
            )
        policy["Statement"].append(statement)
        _check_quotas(policy)
        return {**attributes, POLICY: _text(policy)}

    call.broker.sqs_queues.update(queue.group, change)
    return {}


def remove_permission(call: Call, queue: QueueName, params: dict[str, Any]) -> dict[str, Any]:
    label = str_param(params, "Label", required=False)
    if not label:
        raise missing_parameter("Label")

    def change(attributes: dict[str, str] | None) -> dict[str, str]:
        attributes = attributes or {}
        policy = _policy(attributes)
        kept = [s for s in (policy or {}).get("Statement", []) if s.get("Sid") != label]
        if policy is None or len(kept) == len(policy["Statement"]):
            raise invalid_parameter(
                f"Value {label[:100]} for parameter Label is invalid. Reason: can't find label."
            )
        if not kept:
            return {k: v for k, v in attributes.items() if k != POLICY}
        return {**attributes, POLICY: _text({**policy, "Statement": kept})}

    call.broker.sqs_queues.update(queue.group, change)
    return {}


def _checked(params: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """AddPermission's label, account ids and actions, checked as SQS checks them."""
    label = str_param(params, "Label", required=False)
    if not label:
        raise missing_parameter("Label")
    accounts = list_param(params, "AWSAccountIds")
    actions = list_param(params, "Actions")
    if not actions:
        raise missing_parameter("Actions")
    if not LABEL.fullmatch(label):
        raise invalid_parameter(
            f"Value {label[:100]} for parameter Label is invalid. Reason: Must be 1-80 "
            "alphanumeric characters, hyphens or underscores."
        )
    if not accounts or not all(ACCOUNT_ID.fullmatch(a) for a in accounts):
        shown = "[" + ", ".join(a[:20] for a in accounts[:10]) + "]"
        raise invalid_parameter(
            f"Value {shown} for parameter PrincipalId is invalid. Reason: Unable to verify."
        )
    if len(actions) > MAX_ACTIONS:
        raise SqsError(
            "OverLimit",
            f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS}.",
            status=403,
        )
    for action in actions:
        if action not in ACTIONS:
            raise invalid_parameter(
                f"Value SQS:{action[:100]} for parameter ActionName is invalid. Reason: Only "
                "the queue owner is allowed to invoke this action."
            )
    return label, list(dict.fromkeys(accounts)), list(dict.fromkeys(actions))


def _check_quotas(policy: dict[str, Any]) -> None:
    """OverLimit (403) past SQS's policy quotas: 20 statements, 50 principals, 8,192 bytes."""
    statements = policy["Statement"]
    principals = sum(_principal_count(s) for s in statements)
    size = len(_text(policy).encode())
    for count, most, what in (
        (len(statements), MAX_STATEMENTS, "statements"),
        (principals, MAX_PRINCIPALS, "principals"),
        (size, MAX_POLICY_BYTES, "bytes"),
    ):
        if count > most:
            raise SqsError(
                "OverLimit",
                f"The queue's policy would hold {count} {what}; the most allowed is {most}.",
                status=403,
            )


def _principal_count(statement: dict[str, Any]) -> int:
    principal = statement.get("Principal")
    if not isinstance(principal, dict):
        return 1 if principal else 0
    return sum(len(v) if isinstance(v, list) else 1 for v in principal.values())


def _policy(attributes: dict[str, str]) -> dict[str, Any] | None:
    """The queue's policy document (None: it has none). One set through SetQueueAttributes
    that is not a JSON policy with statements takes no statement (400)."""
    text = attributes.get(POLICY)
    if not text:
        return None
    try:
        policy = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        policy = None
    if not isinstance(policy, dict):
        raise _not_a_policy()
    statements = policy.get("Statement", [])
    if isinstance(statements, dict):  # the policy grammar takes one statement unwrapped
        statements = [statements]
    if not isinstance(statements, list) or not all(isinstance(s, dict) for s in statements):
        raise _not_a_policy()
    return {**policy, "Statement": statements}


def _not_a_policy() -> SqsError:
    return invalid_parameter(
        "Value for parameter Policy is invalid. Reason: the queue's Policy is not a JSON "
        "policy document; set a valid one with SetQueueAttributes first."
    )


def _one_or_list(values: list[str]) -> str | list[str]:
    """SQS writes one principal or action as a string, several as a list."""
    return values[0] if len(values) == 1 else values


def _text(policy: dict[str, Any]) -> str:
    return json.dumps(policy, separators=(",", ":"))
