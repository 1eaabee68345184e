"""The protocol's XML bodies and its ``key:value|`` properties string (pure).

Answers use the default namespace (no prefix), one text node per element (no CDATA) and
``&#13;`` for a carriage return, so the client's minidom reads every value whole.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from xml.parsers import expat

from .errors import MqHttpError, malformed_xml

NAMESPACE = "http://mq.aliyuncs.com/doc/v1/"
DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
PROPERTY_FORBIDDEN = re.compile(r"[:|\"&'<>]")
"""Characters the client refuses in a property name or value (its string format's)."""
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_DIGITS = re.compile("[0-9]+")


@dataclass(frozen=True)
class PublishedMessage:
    """A ``<Message>`` publish request."""

    body: str
    tag: str | None
    properties: dict[str, str]


# ------------------------------------------------------------------------ requests
def whole_number(text: str, max_digits: int) -> int | None:
    """``text`` as a whole number of at most ``max_digits`` ASCII digits, else None (not
    ``str.isdigit``: it accepts digits such as ``"\u00b2"`` that ``int`` refuses)."""
    if len(text) > max_digits or not _DIGITS.fullmatch(text):
        return None
    return int(text)


class _DocumentTypeDeclared(Exception):
    pass


def _refuse_document_type(*_: object) -> None:
    raise _DocumentTypeDeclared


def _parse(body: bytes, root_name: str) -> ET.Element:
    """The body's root element. A document type declaration (the door to entity expansion
    and external entities) is refused by the parser itself, before any entity is declared,
    so the refusal holds in every encoding it reads (UTF-16 as well as UTF-8); an encoding
    it cannot read is MalformedXML."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate(namespace_separator="}")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_document_type
    parser.EntityDeclHandler = _refuse_document_type
    parser.ExternalEntityRefHandler = _refuse_document_type
    parser.StartElementHandler = lambda tag, attributes: builder.start(_clark(tag), attributes)
    parser.EndElementHandler = lambda tag: builder.end(_clark(tag))
    parser.CharacterDataHandler = builder.data
    parser.buffer_text = True
    try:
        parser.Parse(body, True)
        root = builder.close()
    except _DocumentTypeDeclared:
        raise malformed_xml("a document type declaration is not accepted") from None
    except (expat.ExpatError, ValueError, LookupError) as exc:
        raise malformed_xml(f"the body is not well-formed XML: {exc}") from None
    if _local(root.tag) != root_name:
        raise malformed_xml(f"the root element must be <{root_name}>")
    return root


def _clark(tag: str) -> str:
    """expat's ``namespace}local`` as ElementTree's ``{namespace}local``."""
    return "{" + tag if "}" in tag else tag


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _children(root: ET.Element) -> dict[str, str]:
    """Each child element's text; a child holding markup is refused (its text would be cut
    at the first inner element)."""
    found: dict[str, str] = {}
    for child in root:
        name = _local(child.tag)
        if name in found:
            raise malformed_xml(f"<{name}> appears twice")
        found[name] = _text_only(child)
    return found


def _text_only(element: ET.Element) -> str:
    if len(element):
        raise malformed_xml(f"<{_local(element.tag)}> holds an element; escape markup as text")
    return element.text or ""


def parse_message(body: bytes) -> PublishedMessage:
    """A publish request; MalformedXML / InvalidArgument when it is not one."""
    fields = _children(_parse(body, "Message"))
    unknown = set(fields) - {"MessageBody", "MessageTag", "Properties"}
    if unknown:
        raise malformed_xml(f"unknown element <{sorted(unknown)[0]}> in <Message>")
    text = fields.get("MessageBody", "")
    if not text:
        raise MqHttpError(400, "InvalidArgument", "MessageBody is missing or empty")
    return PublishedMessage(
        body=text,
        tag=fields.get("MessageTag") or None,
        properties=parse_properties(fields.get("Properties", "")),
    )


def parse_receipt_handles(body: bytes) -> list[str]:
    """The handles of a ``<ReceiptHandles>`` ack, commit or rollback."""
    handles = []
    for child in _parse(body, "ReceiptHandles"):
        if _local(child.tag) != "ReceiptHandle":
            raise malformed_xml(f"unknown element <{_local(child.tag)}> in <ReceiptHandles>")
        handle = _text_only(child).strip()
        if not handle:
            raise MqHttpError(400, "InvalidArgument", "a ReceiptHandle is empty")
        handles.append(handle)
    if not handles:
        raise MqHttpError(400, "MissingReceiptHandle", "no ReceiptHandle in the request")
    return handles


def parse_properties(text: str) -> dict[str, str]:
    """``k1:v1|k2:v2|`` as the client writes and reads it: entries without exactly one
    ``:`` or with an empty name or value are dropped."""
    properties: dict[str, str] = {}
    for entry in text.split("|"):
        parts = entry.split(":")
        if len(parts) == 2 and parts[0] and parts[1]:
            properties[parts[0]] = parts[1]
    return properties


def format_properties(properties: Mapping[str, str]) -> str:
    """The properties string; entries the format cannot carry are left out."""
    return "".join(
        f"{k}:{v}|"
        for k, v in properties.items()
        if k and v and not PROPERTY_FORBIDDEN.search(k) and not PROPERTY_FORBIDDEN.search(v)
    )


# ------------------------------------------------------------------------ answers
def is_xml_text(text: str) -> bool:
    """Whether ``text`` can travel as XML 1.0 character data."""
    return not _NOT_XML_CHAR.search(text)


def _text(value: object) -> str:
    return (
        str(value)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\r", "&#13;")
    )


def _element(name: str, value: object) -> str:
    return f"<{name}>{_text(value)}</{name}>"


def document(root: str, inner: Iterable[str]) -> str:
    return f'{DECLARATION}<{root} xmlns="{NAMESPACE}">{"".join(inner)}</{root}>'


def publish_answer(message_id: str, body_md5: str, receipt_handle: str | None = None) -> str:
    parts = [_element("MessageId", message_id), _element("MessageBodyMD5", body_md5)]
    if receipt_handle:
        parts.append(_element("ReceiptHandle", receipt_handle))
    return document("Message", parts)


def consumed_message(fields: Mapping[str, object]) -> str:
    """One ``<Message>`` of a consume answer; empty optional fields are left out (the
    client drops an element without text)."""
    return (
        "<Message>"
        + "".join(_element(k, v) for k, v in fields.items() if v is not None and v != "")
        + "</Message>"
    )


def consume_answer(messages: Iterable[str]) -> str:
    return document("Messages", messages)


def error_answer(code: str, message: str, request_id: str, host_id: str) -> str:
    return document(
        "Error",
        [
            _element("Code", code),
            _element("Message", message),
            _element("RequestId", request_id),
            _element("HostId", host_id),
        ],
    )


def handle_errors_answer(errors: Iterable[tuple[str, str, str]]) -> str:
    """``<Errors>`` of an ack: (code, message, receipt handle) per handle not acked."""
    return document(
        "Errors",
        (
            "<Error>"
            + _element("ErrorCode", code)
            + _element("ErrorMessage", message)
            + _element("ReceiptHandle", handle)
            + "</Error>"
            for code, message, handle in errors
        ),
    )
