"""In-process stand-ins for the reads by offset a pull or broadcast consumer makes (the
transport's ``request``), for unit tests: one or two short queues of messages."""

from __future__ import annotations

import base64

from cirrusmq.errors import MQError


def _message(queue: int, offset: int) -> dict:
    return {
        "message_id": f"m{queue}-{offset}",
        "topic": "t",
        "body": base64.b64encode(b"x").decode(),
        "tag": None,
        "keys": [],
        "properties": {},
        "queue": queue,
        "offset": offset,
        "born_timestamp": 1,
        "stored_timestamp": 1,
    }


class StaleEnds:
    """Two queues of 10 messages; the second ends check is stale (3) for queue 0. With
    ``head`` set, the queues really end there (the topic was made again)."""

    request_timeout_s = 1.0

    def __init__(self, head: int = 10) -> None:
        self.ends_checks = 0
        self.head = head

    def request(self, method, path, params=None, json_body=None, timeout_s=None):  # noqa: ANN001, ANN201
        if path.endswith("/offsets"):
            if params and params.get("include_min") == "false":
                self.ends_checks += 1
                stale = self.ends_checks == 2
                q0 = 3 if stale else self.head
                return {
                    "topic": "t",
                    "queues": [
                        {"queue": 0, "min_offset": None, "max_offset": q0},
                        {"queue": 1, "min_offset": None, "max_offset": self.head},
                    ],
                }
            return {
                "topic": "t",
                "queues": [{"queue": q, "min_offset": 0, "max_offset": self.head} for q in (0, 1)],
            }
        q = int(path.split("/queues/")[1].split("/")[0])
        offset = int(params["offset"])
        if offset > self.head:  # the read checks the consistent head
            raise MQError(
                "beyond the end",
                code="InvalidOffset",
                http_status=400,
                details={"max_offset": self.head},
            )
        n = min(5, self.head - offset)
        return {
            "start_offset": offset,
            "next_offset": offset + n,
            "truncated": False,
            "max_offset": self.head,
            "messages": [_message(q, o) for o in range(offset, offset + n)],
        }

    def close(self) -> None:
        pass


class OneQueue:
    request_timeout_s = 1.0

    def request(self, method, path, params=None, json_body=None, timeout_s=None):  # noqa: ANN001, ANN201
        if path.endswith("/offsets"):
            return {"topic": "t", "queues": [{"queue": 0, "min_offset": 0, "max_offset": 100}]}
        offset = int(params["offset"])
        return {
            "start_offset": offset,
            "next_offset": offset + 1,
            "truncated": False,
            "max_offset": 100,
            "messages": [_message(0, offset)] if offset < 100 else [],
        }

    def close(self) -> None:
        pass
