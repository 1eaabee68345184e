"""Every answer of the JSON API carries ``X-Content-Type-Options: nosniff`` (successes and
errors, signed or not, the console's files too); the answer that shows a new key's secret
also carries ``Cache-Control: no-store``. Over real HTTP through the local stack: the
handlers set them, so the deployed API Gateway sends them too."""

from __future__ import annotations

import httpx
from api_helpers import signed_client


def test_every_json_api_answer_says_nosniff(cirrusmq_stack) -> None:
    with signed_client(cirrusmq_stack) as admin:
        answers = {
            "ok": admin.get("/v1/topics"),
            "health": admin.get("/v1/health"),
            "not found": admin.get("/v1/topics/no-such-topic-here"),
            "bad request": admin.post("/v1/topics", json={"name": "bad name!"}),
            "no route": admin.get("/v1/openapi.json/nothing"),
        }
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=60) as anonymous:
        answers["unsigned"] = anonymous.get("/v1/topics")
        answers["console"] = anonymous.get("/console")
        answers["console file"] = anonymous.get("/console/app.js")
    assert {name: r.headers.get("x-content-type-options") for name, r in answers.items()} == {
        name: "nosniff" for name in answers
    }
    assert answers["unsigned"].status_code == 401


def test_a_new_keys_secret_is_not_stored_by_caches(cirrusmq_stack) -> None:
    with signed_client(cirrusmq_stack) as admin:
        created = admin.post("/v1/keys", json={"permissions": {"admin": False}})
        listed = admin.get("/v1/keys")
    assert created.status_code == 201 and "secret_key" in created.json()
    assert created.headers.get("cache-control") == "no-store"
    assert created.headers.get("x-content-type-options") == "nosniff"
    assert listed.headers.get("x-content-type-options") == "nosniff"
