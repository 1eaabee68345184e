"""The SQS and RocketMQ HTTP routes answer with ``X-Content-Type-Options: nosniff`` like the
JSON API: successes and errors, over real HTTP through the local stack (the handlers set
it, so the deployed API Gateway sends it too)."""

from __future__ import annotations

import httpx
from mq_http_sdk import mq_http

from .conftest import unique
from .sqs_helpers import sqs_client

INSTANCE = "MQ_INST_local"


def test_sqs_answers_say_nosniff(cirrusmq_stack) -> None:
    queue_name = unique("q")
    seen: list[str | None] = []
    client = sqs_client(cirrusmq_stack)
    client.meta.events.register(
        "after-call.sqs.*",
        lambda http_response, **_: seen.append(http_response.headers.get("x-content-type-options")),
    )
    client.create_queue(QueueName=queue_name)
    client.list_queues()
    client.close()
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=60) as anonymous:
        json_error = anonymous.post(
            "/",
            content=b"{}",
            headers={
                "X-Amz-Target": "AmazonSQS.ListQueues",
                "Content-Type": "application/x-amz-json-1.0",
            },
        )
        query_error = anonymous.post(
            "/000000000000/" + queue_name,
            content=b"Action=ReceiveMessage",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    assert seen == ["nosniff", "nosniff"]
    assert json_error.status_code >= 400 and query_error.status_code >= 400
    assert json_error.headers.get("x-content-type-options") == "nosniff"
    assert query_error.headers.get("x-content-type-options") == "nosniff"


def test_rocketmq_http_answers_say_nosniff(cirrusmq_stack, client, make_topic, monkeypatch):
    seen: list[str | None] = []
    send = mq_http.MQHttp.send_request

    def recorded(self, request):  # noqa: ANN001, ANN202
        response = send(self, request)
        headers = {k.lower(): v for k, v in response.header.items()}
        seen.append(headers.get("x-content-type-options"))
        return response

    monkeypatch.setattr(mq_http.MQHttp, "send_request", recorded)
    from mq_http_sdk.mq_producer import TopicMessage

    client.get_producer(INSTANCE, make_topic()).publish_message(TopicMessage("hello"))
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=60) as anonymous:
        unsigned = anonymous.get("/topics/anything/messages?consumer=GID-x&numOfMessages=1")
    assert seen == ["nosniff"]
    assert unsigned.status_code >= 400
    assert unsigned.headers.get("x-content-type-options") == "nosniff"
