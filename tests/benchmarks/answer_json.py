"""CPU time to write a receive answer as JSON: the API's writer against Powertools' default.

    python tests/benchmarks/answer_json.py [--messages 1000] [--rounds 5]

The answer is the receive route's own model (``ReceiveResponse``) of ``--messages`` messages
of 1 KiB (base64 bodies, a 200-character receipt handle each), dumped as Powertools dumps it
before writing; each writer writes it 20 times per round, rounds alternating between the
writers, and the best round counts. Only the writing step is timed.
"""

from __future__ import annotations

import argparse
import base64
import time
from collections.abc import Callable
from typing import Any

from cirrusmq_api.app import _POWERTOOLS_JSON, write_json
from cirrusmq_api.schemas import ReceivedMessageBody, ReceiveResponse

WRITES_PER_ROUND = 20


def answer(messages: int) -> dict[str, Any]:
    body = base64.b64encode(b"x" * 1024).decode()
    return ReceiveResponse(
        messages=[
            ReceivedMessageBody(
                message_id=f"01JD{i:022d}",
                topic="orders",
                queue=i % 8,
                offset=i,
                body=body,
                tag="TagA",
                keys=[f"order-{i}"],
                properties={"region": "eu"},
                message_group=None,
                born_timestamp=1_790_000_000_000,
                stored_timestamp=1_790_000_000_000,
                receipt_handle="h" * 200,
                delivery_attempt=1,
                invisible_until=1_790_000_060_000,
            )
            for i in range(messages)
        ]
    ).model_dump(mode="json")


def best_ms(write: Callable[[Any], str], value: Any, rounds: list[float]) -> None:
    started = time.process_time()
    for _ in range(WRITES_PER_ROUND):
        write(value)
    rounds.append((time.process_time() - started) / WRITES_PER_ROUND * 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    value = answer(args.messages)
    writers = {"Powertools json.dumps": _POWERTOOLS_JSON, "write_json": write_json}
    rounds: dict[str, list[float]] = {name: [] for name in writers}
    for _ in range(args.rounds):
        for name, write in writers.items():
            best_ms(write, value, rounds[name])
    size = len(write_json(value).encode())
    print(f"a receive answer of {args.messages} messages ({size:,} bytes), CPU ms per write:")
    for name, times in rounds.items():
        print(f"  {name:<22} best {min(times):6.2f}  worst {max(times):6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
