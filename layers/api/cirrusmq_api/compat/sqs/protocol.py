"""The two wire protocols: AWS JSON 1.0 and the query protocol (form in, XML out).

Both are read into one request shape (the JSON protocol's: ``{"QueueUrl": ..., "Entries":
[...]}``) and an action's result, in the same shape, is written back in the protocol the
request came in. The query protocol's flattened lists (``AttributeName.1``,
``MessageAttribute.1.Value.StringValue``) are mapped by :data:`QUERY_LISTS`.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape as _escape

from .errors import SqsError
from .sigv4 import AUTH_PARAMETERS

JSON = "json"
QUERY = "query"
TARGET_PREFIX = "AmazonSQS."
XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
JSON_TYPES = {
    "InvalidParameterValue": "InvalidParameterValueException",
    "MissingParameter": "MissingRequiredParameterException",
}
"""The JSON ``__type`` SQS gives its generic errors: the exception's name, not the query code
(which the ``x-amzn-query-error`` header still carries)."""
NO_RESULT = frozenset(
    {
        "AddPermission", "ChangeMessageVisibility", "DeleteMessage", "DeleteQueue",
        "PurgeQueue", "RemovePermission", "SetQueueAttributes", "TagQueue", "UntagQueue",
    }
)  # fmt: skip
"""Actions without an output shape: their query answer has no ``<{Action}Result>`` element.
Every other action's answer has one, empty when there is nothing to say (an empty receive, no
tags), as SQS sends it and as botocore's query parser requires."""

QUERY_LISTS: dict[str, tuple[str, str]] = {
    # query name -> (JSON name, kind): "list" of scalars/structures, "map" of Name/Value
    "Attribute": ("Attributes", "map"),
    "AttributeName": ("AttributeNames", "list"),
    "MessageAttribute": ("MessageAttributes", "map"),
    "MessageAttributeName": ("MessageAttributeNames", "list"),
    "MessageSystemAttributeName": ("MessageSystemAttributeNames", "list"),
    "MessageSystemAttribute": ("MessageSystemAttributes", "map"),
    "SendMessageBatchRequestEntry": ("Entries", "list"),
    "DeleteMessageBatchRequestEntry": ("Entries", "list"),
    "ChangeMessageVisibilityBatchRequestEntry": ("Entries", "list"),
    "Tag": ("tags", "map"),
    "TagKey": ("TagKeys", "list"),
    "AWSAccountId": ("AWSAccountIds", "list"),
    "ActionName": ("Actions", "list"),
}
"""Flattened query lists and maps → their JSON request names."""
QUERY_RENAMES: dict[str, dict[str, str]] = {"TagQueue": {"tags": "Tags"}}
"""Where an action's JSON name differs from the one its query list maps to (``Tag.N`` is
CreateQueue's ``tags`` but TagQueue's ``Tags``)."""

XML_LIST_ITEMS: dict[str, str] = {
    # JSON result name -> the flattened element each item is written as
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Successful": "",  # <Action>ResultEntry, filled in per action
    "Failed": "BatchResultErrorEntry",
    "Results": "",  # ListMessageMoveTasksResultEntry
}
XML_MAPS: dict[str, str] = {
    "Attributes": "Attribute",
    "MessageAttributes": "MessageAttribute",
    "Tags": "Tag",
}


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot carry, not even as character references."""


def escape(text: str) -> str:
    """``text`` as XML character data: markup escaped, a character XML 1.0 cannot carry
    replaced by U+FFFD (actions replace them first, where digests cover the text; this
    guards every other answer), and a carriage return as ``&#13;`` so parsers keep it."""
    return _escape(_NOT_XML.sub("\ufffd", text)).replace("\r", "&#13;")


@dataclass(frozen=True)
class SqsRequest:
    protocol: str
    action: str
    params: dict[str, Any]


def detect(headers: Mapping[str, str], body: bytes) -> str:
    """The request's protocol: JSON when it names its action in ``X-Amz-Target``."""
    target = headers.get("x-amz-target", "")
    return JSON if target.startswith(TARGET_PREFIX) else QUERY


def parse(protocol: str, headers: Mapping[str, str], body: bytes, raw_query: str) -> SqsRequest:
    if protocol == JSON:
        action = headers.get("x-amz-target", "")[len(TARGET_PREFIX) :]
        try:
            params = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise SqsError("SerializationException", "The request body is not JSON.") from None
        if not isinstance(params, dict):
            raise SqsError("SerializationException", "The request body is not a JSON object.")
        return SqsRequest(JSON, action, params)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SqsError("MalformedQueryString", "The request body is not UTF-8.") from None
    pairs = parse_qsl(raw_query, keep_blank_values=True) + parse_qsl(text, keep_blank_values=True)
    fields = dict(pairs)
    if len(fields) != len(pairs):  # which value counts would be a guess: refuse them all
        seen: set[str] = set()
        repeated = next(name for name, _ in pairs if name in seen or seen.add(name))
        raise SqsError(
            "MalformedQueryString", f"The parameter {repeated[:100]} is given more than once."
        )
    action = fields.pop("Action", "")
    fields.pop("Version", None)
    for name in AUTH_PARAMETERS:  # a presigned request's signature, not the action's input
        fields.pop(name, None)
    if not action:
        raise SqsError("MissingAction", "The request must contain the parameter Action.")
    params = query_params(fields)
    for query_name, json_name in QUERY_RENAMES.get(action, {}).items():
        if query_name in params:
            params[json_name] = params.pop(query_name)
    return SqsRequest(QUERY, action, params)


def query_params(fields: Mapping[str, str]) -> dict[str, Any]:
    """Flattened query fields as the JSON request shape."""
    tree: dict[str, Any] = {}
    for name, value in fields.items():
        node = tree
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SqsError("MalformedQueryString", f"Parameter {name} is malformed.")
        if isinstance(node.get(parts[-1]), dict):
            raise SqsError("MalformedQueryString", f"Parameter {name} is malformed.")
        node[parts[-1]] = value
    return _translate(tree)


_EMPTY = {json_name: kind for json_name, kind in QUERY_LISTS.values()}
"""The JSON names of the query protocol's lists and maps, and which each is."""


def _translate(tree: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in tree.items():
        if name in QUERY_LISTS and isinstance(value, dict):
            json_name, kind = QUERY_LISTS[name]
            items = [value[k] for k in sorted(value, key=_position)]
            if kind == "map":
                out[json_name] = {
                    _key(item): _map_value(_get(item, "Value"))
                    for item in items
                    if isinstance(item, dict)
                }
            else:
                out[json_name] = [_translate(i) if isinstance(i, dict) else i for i in items]
        elif name in _EMPTY and value == "":
            # botocore sends an empty list or map as the member's name without a value
            out[name] = {} if _EMPTY[name] == "map" else []
        elif isinstance(value, dict):
            out[name] = _translate(value)
        else:
            out[name] = value
    return out


def _position(key: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise SqsError("MalformedQueryString", f"List position {key!r} is not a number.") from None


def _get(item: Any, *names: str) -> Any:
    if isinstance(item, dict):
        for name in names:
            if name in item:
                return item[name]
    raise SqsError("MalformedQueryString", f"A list entry is missing {names[0]}.")


def _key(item: Any) -> str:
    """A map entry's name (``Name`` or ``Key``): one field, never a nested structure."""
    key = _get(item, "Name", "Key")
    if not isinstance(key, str):
        raise SqsError("MalformedQueryString", "A map entry's name is not a single field.")
    return key


def _map_value(value: Any) -> Any:
    return _translate(value) if isinstance(value, dict) else value


# --------------------------------------------------------------------------- answers
def request_id() -> str:
    return str(uuid.uuid4())


def answer(protocol: str, action: str, result: dict[str, Any]) -> dict[str, Any]:
    """An API Gateway (v2) response carrying ``result``."""
    rid = request_id()
    if protocol == JSON:
        return _response(200, "application/x-amz-json-1.0", json.dumps(result), rid)
    body = (
        f'<{action}Response xmlns="{XML_NAMESPACE}">'
        + ("" if action in NO_RESULT else _element(f"{action}Result", _xml(result, action)))
        + f"<ResponseMetadata><RequestId>{rid}</RequestId></ResponseMetadata>"
        + f"</{action}Response>"
    )
    return _response(200, "text/xml", body, rid)


def query_json_answer(action: str, result: dict[str, Any]) -> dict[str, Any]:
    """A query request's answer as JSON, for a GET that accepts only JSON: the XML answer's
    structure, with the result's members named as SQS names them there (``queueUrls``,
    ``messages``)."""
    rid = request_id()
    response: dict[str, Any] = {"ResponseMetadata": {"RequestId": rid}}
    if action not in NO_RESULT:
        response[f"{action}Result"] = {name[:1].lower() + name[1:]: v for name, v in result.items()}
    body = json.dumps({f"{action}Response": response})
    return _response(200, "application/json", body, rid)


def unknown_operation() -> dict[str, Any]:
    """SQS's answer to a GET that names no action."""
    rid = request_id()
    return _response(404, "text/xml", "<UnknownOperationException/>", rid)


def error_answer(protocol: str, error: SqsError) -> dict[str, Any]:
    rid = request_id()
    fault = "Sender" if error.sender else "Receiver"
    if protocol == JSON:
        json_type = JSON_TYPES.get(error.code, error.code)
        body = json.dumps({"__type": f"com.amazonaws.sqs#{json_type}", "message": error.message})
        headers = {"x-amzn-query-error": f"{error.query_code};{fault}"}
        return _response(error.status, "application/x-amz-json-1.0", body, rid, headers)
    body = (
        f'<ErrorResponse xmlns="{XML_NAMESPACE}"><Error><Type>{fault}</Type>'
        f"<Code>{escape(error.query_code)}</Code>"
        f"<Message>{escape(error.query_message)}</Message>"
        f"<Detail/></Error><RequestId>{rid}</RequestId></ErrorResponse>"
    )
    return _response(error.status, "text/xml", body, rid)


def _response(
    status: int, content_type: str, body: str, rid: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_type, "x-amzn-RequestId": rid, **(headers or {})},
        "body": body,
        "isBase64Encoded": False,
    }


def _element(name: str, inner: str) -> str:
    """An element, written ``<name/>`` when empty, as SQS writes an empty result."""
    return f"<{name}>{inner}</{name}>" if inner else f"<{name}/>"


def _xml(value: Any, action: str) -> str:
    parts: list[str] = []
    for name, item in value.items():
        if name in XML_MAPS and isinstance(item, dict):
            element = XML_MAPS[name]
            key_name = "Key" if element == "Tag" else "Name"
            for key, entry in item.items():
                inner = _xml(entry, action) if isinstance(entry, dict) else _scalar(entry)
                parts.append(
                    f"<{element}><{key_name}>{escape(str(key))}</{key_name}>"
                    f"<Value>{inner}</Value></{element}>"
                )
        elif isinstance(item, list):
            element = XML_LIST_ITEMS.get(name, name) or f"{action}ResultEntry"
            for entry in item:
                inner = _xml(entry, action) if isinstance(entry, dict) else _scalar(entry)
                parts.append(f"<{element}>{inner}</{element}>")
        elif isinstance(item, dict):
            parts.append(f"<{name}>{_xml(item, action)}</{name}>")
        elif item is not None:
            parts.append(f"<{name}>{_scalar(item)}</{name}>")
    return "".join(parts)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return escape(str(value))
