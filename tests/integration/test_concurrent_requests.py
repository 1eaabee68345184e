"""Requests in flight at once through the local gateway never see each other's data.

Every request here carries something only it may see in its answer (its own message ids, its
own topic's messages, its own receipt handles, its own group's description) and is signed with
one of several keys; the answers are checked one by one. Sends, receives, acks, heartbeats and
reads of different routes run together in many threads, so function environments serve them
concurrently: a shared per-request state (the event being resolved, the validated body, the
caller's key) would show up as a 400 for a body validated against another route, an answer
naming another request's ids, or a 403 for a key that may do what it asked.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from api_helpers import b64, signed_client
from cirrusmq import Admin, Permissions, SubscribeGrant

WORKERS = 12
ROUNDS = 6


def _admin(stack) -> Admin:
    return Admin(stack.endpoint, stack.credentials, request_timeout_s=60)


def test_concurrent_requests_of_different_routes_and_keys_keep_their_own_data(cirrusmq_stack):
    tag = uuid.uuid4().hex[:8]
    lanes = []
    with _admin(cirrusmq_stack) as admin:
        for lane in range(WORKERS):
            topic, group = f"cc-{tag}-{lane}", f"cg-{tag}-{lane}"
            admin.create_topic(topic, queues=2)
            key = admin.create_access_key(
                Permissions(publish=(topic,), subscribe=(SubscribeGrant((group,), (topic,)),)),
                f"concurrency lane {lane}",
            )
            lanes.append((topic, group, key.credentials))

    def lane_work(lane: int) -> list[str]:
        """One lane's history; returns what went wrong (nothing, if requests stay apart)."""
        topic, group, credentials = lanes[lane]
        problems: list[str] = []
        with signed_client(cirrusmq_stack, credentials) as http:
            for round_ in range(ROUNDS):
                ids = [f"{topic}-{round_}-{i}" for i in range(3)]
                sent = http.post(
                    f"/v1/topics/{topic}/messages",
                    json={
                        "messages": [
                            {"message_id": mid, "body": b64(mid.encode()), "tag": f"L{lane}"}
                            for mid in ids
                        ]
                    },
                )
                if sent.status_code != 200:
                    problems.append(f"send {sent.status_code} {sent.text[:200]}")
                    continue
                answered = [r["message_id"] for r in sent.json()["receipts"]]
                if answered != ids:
                    problems.append(f"send answered {answered} for {ids}")
                beat = http.post(
                    f"/v1/groups/{group}/heartbeat",
                    json={"client_id": f"c-{lane}", "subscriptions": {topic: "*"}},
                )
                if beat.status_code != 200:
                    problems.append(f"heartbeat {beat.status_code} {beat.text[:200]}")
                got: dict[str, str] = {}
                for _ in range(10):
                    received = http.post(
                        f"/v1/groups/{group}/receive",
                        json={"topic": topic, "max_messages": 10, "wait_seconds": 1},
                    )
                    if received.status_code != 200:
                        problems.append(f"receive {received.status_code} {received.text[:200]}")
                        break
                    for m in received.json()["messages"]:
                        got[m["message_id"]] = m["receipt_handle"]
                        if m["topic"] != topic or m["tag"] != f"L{lane}":
                            problems.append(f"received another lane's message {m['message_id']}")
                    if set(ids) <= set(got):
                        break
                if not set(ids) <= set(got):
                    problems.append(f"missing {sorted(set(ids) - set(got))}")
                handles = [got[mid] for mid in ids if mid in got]
                acked = http.post(f"/v1/groups/{group}/ack", json={"receipt_handles": handles})
                if acked.status_code != 200:
                    problems.append(f"ack {acked.status_code} {acked.text[:200]}")
                else:
                    results = acked.json()["results"]
                    if [r["receipt_handle"] for r in results] != handles:
                        problems.append("ack answered for other receipt handles")
                    if any(r["status"] != "acked" for r in results):
                        problems.append(f"ack statuses {[r['status'] for r in results]}")
                described = http.get(f"/v1/groups/{group}", params={"topic": topic})
                if described.status_code != 200:
                    problems.append(f"describe {described.status_code} {described.text[:200]}")
                elif described.json().get("group") != group:
                    problems.append(f"describe answered for {described.json().get('group')}")
        return problems

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        problems = [p for lane in pool.map(lane_work, range(WORKERS)) for p in lane]
    assert problems == []
