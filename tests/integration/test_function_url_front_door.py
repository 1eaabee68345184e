"""A local stack deployed with ``FrontDoor=function-url``: one function behind a function URL
answers every route, and the SDK, boto3's SQS client and the RocketMQ HTTP client work
through it over real HTTP, their signatures checked against the host and path the function
URL delivers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import StackAuth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials
from cirrusmq import Admin, Credentials, Message, Producer, SimpleConsumer
from cirrusmq.testing import LocalStack

ROUTED_FUNCTIONS = {
    "AdminFunction",
    "ProduceFunction",
    "ConsumeFunction",
    "SqsFunction",
    "TransactionsFunction",
    "MqHttpFunction",
}


@pytest.fixture(scope="module")
def cirrusmq_stack() -> Iterator[LocalStack]:
    with LocalStack(schedules=False, parameters={"FrontDoor": "function-url"}) as stack:
        yield stack


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_one_function_serves_the_api(cirrusmq_stack: LocalStack) -> None:
    functions = set(cirrusmq_stack.functions)
    assert "FrontDoorFunction" in functions
    assert not functions & ROUTED_FUNCTIONS


def test_the_sdk_produces_receives_and_acks(cirrusmq_stack: LocalStack) -> None:
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    topic = unique("fu")
    with Admin(endpoint, credentials) as admin:
        admin.create_topic(topic, queues=2)
    with Producer(endpoint, credentials) as producer:
        for i in range(3):
            producer.send(Message(topic, f"m{i}".encode(), keys=[f"k{i}"]))
    with SimpleConsumer(endpoint, credentials, "g", [topic], await_duration=1) as consumer:
        got = consumer.receive(10, 60)
        assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
        assert all(result.acked for result in consumer.ack_batch(got))
        consumer.await_duration_s = 0
        assert consumer.receive(10, 60) == []


def test_boto3_sqs_sends_receives_and_deletes(cirrusmq_stack: LocalStack) -> None:
    import boto3
    from botocore.config import Config

    credentials = cirrusmq_stack.credentials
    sqs = boto3.session.Session().client(
        "sqs",
        endpoint_url=cirrusmq_stack.endpoint,
        region_name="us-east-1",
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        config=Config(retries={"max_attempts": 1}),
    )
    try:
        url = sqs.create_queue(QueueName=unique("q"))["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert message["Body"] == "hello"
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
    finally:
        sqs.close()


def test_the_rocketmq_http_client_publishes_and_consumes(cirrusmq_stack: LocalStack) -> None:
    from mq_http_sdk.mq_client import MQClient
    from mq_http_sdk.mq_producer import TopicMessage

    credentials = cirrusmq_stack.credentials
    topic = unique("mq")
    with Admin(cirrusmq_stack.endpoint, credentials) as admin:
        admin.create_topic(topic)
    client = MQClient(cirrusmq_stack.endpoint, credentials.access_key, credentials.secret_key)
    try:
        client.get_producer("", topic).publish_message(TopicMessage("hi", ""))
        consumer = client.get_consumer("", topic, "GID_fu")
        [message] = consumer.consume_message(16, 1)
        assert message.message_body == "hi"
        consumer.ack_message([message.receipt_handle])
    finally:
        client.close_connection()


def test_a_signature_for_another_path_is_refused(cirrusmq_stack: LocalStack) -> None:
    credentials = cirrusmq_stack.credentials
    auth = StackAuth(credentials)  # the broker clock: other tests of the session move it
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=30) as http:
        signed = next(auth.auth_flow(http.build_request("GET", "/v1/topics")))
        other = http.build_request("GET", "/v1/groups", headers=dict(signed.headers))
        refused = http.send(other)  # first: its nonce is not yet used
        assert refused.status_code == 401
        assert refused.json()["code"] == "InvalidSignature"
        assert http.send(signed).status_code == 200
        wrong_key = StackAuth(Credentials(credentials.access_key, "x" * 40))
        answer = http.get("/v1/topics", auth=wrong_key)
        assert answer.status_code == 401
        assert answer.json()["code"] == "InvalidSignature"


def test_a_sigv4_signature_for_another_host_is_refused(cirrusmq_stack: LocalStack) -> None:
    credentials = cirrusmq_stack.credentials
    aws = AwsCredentials(credentials.access_key, credentials.secret_key)
    body = json.dumps({"QueueNamePrefix": "none-"})
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"}

    def signed_for(host: str) -> dict[str, str]:
        request = AWSRequest("POST", f"https://{host}/", data=body, headers=headers)
        SigV4Auth(aws, "sqs", "us-east-1").add_auth(request)
        return dict(request.headers)

    own_host = httpx.URL(cirrusmq_stack.endpoint).netloc.decode()
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=30) as http:
        accepted = http.post("/", content=body, headers=signed_for(own_host))
        assert accepted.status_code == 200, accepted.text
        refused = http.post(
            "/", content=body, headers=signed_for("abc.lambda-url.us-east-1.on.aws")
        )
        assert refused.status_code in {400, 403}
        assert "Signature" in refused.text


def test_no_route_is_a_json_404(cirrusmq_stack: LocalStack) -> None:
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=30) as http:
        answer = http.get("/v2/nothing")
    assert answer.status_code == 404
    assert answer.json()["code"] == "RouteNotFound"


def test_every_route_needs_a_signature_through_the_front_door(cirrusmq_stack: LocalStack):
    """The HTTP API branch's deny-by-default guard (test_auth_matrix), through the function
    URL: every route of the template answers an unsigned request as it does there."""
    from test_auth_matrix import OPEN_ROUTES, SQS_ROUTES

    routes = [
        (route.method, route.path)
        for name in sorted(ROUTED_FUNCTIONS)
        for route in cirrusmq_stack.template.functions[name].http_routes
    ]
    assert len(routes) >= 50
    message_id = "01JD0000000000000000000000"
    for method, path in routes:
        concrete = path.replace("{topic}", "orders").replace("{group}", "billing")
        concrete = concrete.replace("{message_id}", message_id).replace("{access_key}", "x")
        concrete = concrete.replace("{name}", "app.js").replace("{queue}", "0")
        concrete = concrete.replace("{account_id}", "000000000000").replace("{queue_name}", "q")
        concrete = concrete.replace("{producer_group}", "pg").replace("{transaction_id}", "t")
        concrete = concrete.replace("{client_id}", "c")
        response = httpx.request(method, cirrusmq_stack.endpoint + concrete, json={}, timeout=60)
        expected = OPEN_ROUTES.get((method, path)) or SQS_ROUTES.get((method, path), 401)
        assert response.status_code == expected, (method, path, response.text)
