"""The adapter's XML and properties string, read as the unmodified client reads them
(its own decoders), and the error code the request log records."""

from __future__ import annotations

from cirrusmq_api.compat.mqhttp import wire
from cirrusmq_api.observability import _error_code
from mq_http_sdk.mq_tool import MQUtils
from mq_http_sdk.mq_xml_handler import ConsumeMessageDecoder, ErrorDecoder


def test_properties_round_trip_through_the_clients_parser() -> None:
    text = wire.format_properties({"KEYS": "k1 k2", "a": "1", "bad|name": "x", "b": "c:d"})
    assert text == "KEYS:k1 k2|a:1|"
    assert MQUtils.string_to_map(text) == wire.parse_properties(text) == {"KEYS": "k1 k2", "a": "1"}


def test_a_consume_answer_decodes_whole_in_the_client() -> None:
    message = wire.consumed_message(
        {
            "MessageId": "m1",
            "ReceiptHandle": "h1",
            "MessageBody": 'a<b>&"\r\nc',
            "PublishTime": 1,
            "FirstConsumeTime": 2,
            "NextConsumeTime": 3,
            "ConsumedTimes": 1,
            "MessageTag": "",
            "Properties": "",
        }
    )
    [decoded] = ConsumeMessageDecoder.decode(wire.consume_answer([message]), "req")
    assert decoded.message_body == 'a<b>&"\r\nc'
    assert decoded.message_tag == "" and decoded.consumed_times == 1


def test_an_error_decodes_with_its_code_and_the_log_records_it() -> None:
    body = wire.error_answer("MessageNotExist", "Message not exist.", "R1", "http://h")
    assert ErrorDecoder.decodeError(body, "req")[:4] == (
        "MessageNotExist",
        "Message not exist.",
        "R1",
        "http://h",
    )
    assert _error_code({"statusCode": 404, "body": body}) == "MessageNotExist"
    errors = wire.handle_errors_answer([("ReceiptHandleError", "expired", "h1")])
    assert _error_code({"statusCode": 404, "body": errors}) == "ReceiptHandleError"
