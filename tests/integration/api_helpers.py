"""Helpers for talking to the local stack's HTTP API in tests."""

from __future__ import annotations

import base64

import httpx


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def make_topic(api: httpx.Client, name: str, **fields) -> dict:
    response = api.post("/v1/topics", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def send(api: httpx.Client, topic: str, *messages: dict, **request) -> dict:
    response = api.post(
        f"/v1/topics/{topic}/messages", json={"messages": list(messages), **request}
    )
    assert response.status_code == 200, response.text
    return response.json()


def receive(api: httpx.Client, group: str, topic: str, **fields) -> list[dict]:
    response = api.post(f"/v1/groups/{group}/receive", json={"topic": topic, **fields})
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def ack(api: httpx.Client, group: str, messages: list[dict]) -> httpx.Response:
    return api.post(
        f"/v1/groups/{group}/ack", json={"receipt_handles": [m["receipt_handle"] for m in messages]}
    )


def object_keys(stack, topic: str) -> list[str]:
    s3 = stack.boto3_client("s3")
    listed = s3.list_objects_v2(
        Bucket=stack.resources["MessageBucket"], Prefix=f"topics/topic={topic}/"
    )
    return [o["Key"] for o in listed.get("Contents", [])]


def max_offsets(api: httpx.Client, topic: str) -> list[int]:
    return [q["max_offset"] for q in api.get(f"/v1/topics/{topic}").json()["queue_offsets"]]
