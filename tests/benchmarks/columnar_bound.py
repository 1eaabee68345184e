"""The least CPU a columnar wire format would still spend on 1,000 messages.

    python tests/benchmarks/columnar_bound.py [--messages 1000] [--rounds 5]

docs/deploy.md weighs a wire format that skips the per-message work of today's JSON one:
the producer sends its batch as one Arrow IPC stream, the broker checks it column by
column and writes it as the batch object without a Python object per message, and a
receive answers an Arrow IPC stream too. Even so, some work grows with the messages. This
times those steps alone, on ``--messages`` messages of 1 KiB (random bodies, ULID-sized
ids), with the broker's own batch schema, Parquet settings and receipt signer:

- produce: the Lambda runtime parsing the event (the body base64-encoded, as a function
  URL or an HTTP API passes a binary body), the base64 decode, reading the IPC stream, bulk
  checks with pyarrow.compute (body sizes, id lengths, duplicate ids), the request digest
  (SHA-256 of the body), the Parquet encode of the batch object;
- receive: the Parquet decode, the receipt handles, the IPC encode of the answer, its
  base64 encode and the runtime writing the result;
- ack: verifying the handles (a fresh signer: nothing remembered).

Handles come two ways: today's, one signed per message, and the cheapest that still lets
each message be acked on its own, one signed token per lease shared by its handles
(``token.offset``). The second total is the bound.

Nothing here builds that format; the per-request work that does not grow with the batch
(routing, authentication, the AWS calls) is measured by ``core_queue.py --batches 1`` (its
"p50 CPU ms" column). Each step runs 20 times per round and the best round counts.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from cirrusmq_broker.codec import BATCH_SCHEMA
from cirrusmq_broker.limits import MAX_BODY_BYTES
from cirrusmq_broker.rules.receipts import ReceiptHandle, ReceiptSigner

RUNS_PER_ROUND = 20
NOW_MS = 1_790_000_000_000


def batch_table(messages: int) -> pa.Table:
    """A batch object's table: ``messages`` rows of 1 KiB, no tags, keys or properties."""
    columns: dict[str, pa.Array] = {}
    for field in BATCH_SCHEMA:
        if field.name == "message_id":
            columns[field.name] = pa.array([os.urandom(13).hex()[:26] for _ in range(messages)])
        elif field.name == "body":
            columns[field.name] = pa.array([os.urandom(1024) for _ in range(messages)])
        elif field.name in ("keys", "properties"):
            columns[field.name] = pa.array([[]] * messages, field.type)
        elif field.name in ("born_timestamp", "stored_timestamp"):
            columns[field.name] = pa.array([NOW_MS] * messages, pa.int64()).cast(field.type)
        elif not field.nullable:
            columns[field.name] = pa.array([0] * messages, field.type)
        else:
            columns[field.name] = pa.nulls(messages, field.type)
    return pa.table(columns, schema=BATCH_SCHEMA)


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")  # as codec.encode_batch writes it
    return sink.getvalue()


def checked(table: pa.Table) -> bool:
    sizes = pc.binary_length(table["body"])
    bodies_fit = pc.all(pc.and_(pc.greater(sizes, 0), pc.less_equal(sizes, MAX_BODY_BYTES)))
    ids_fit = pc.all(pc.less_equal(pc.utf8_length(table["message_id"]), 128))
    unique = pc.count_distinct(table["message_id"]).as_py() == table.num_rows
    return bool(bodies_fit.as_py() and ids_fit.as_py() and unique)


def verified(texts: list[str]) -> list[ReceiptHandle]:
    signer = ReceiptSigner("columnar-bound-secret")  # remembers nothing yet
    return [signer.decode(text) for text in texts]


def lease_handles(token: str, first: int, count: int) -> list[str]:
    """Handles sharing their lease's one signed token: ``token.offset``."""
    return [f"{token}.{offset}" for offset in range(first, first + count)]


def lease_offsets(signer: ReceiptSigner, texts: list[str]) -> list[int]:
    """Checks the shared token once, then reads each handle's offset."""
    tokens, offsets = set(), []
    for text in texts:
        token, _, offset = text.rpartition(".")
        tokens.add(token)
        offsets.append(int(offset))
    for token in tokens:
        signer.decode(token)
    return offsets


Step = tuple[str, Callable[[], Any], str]
"""(name, the step, which handle form it belongs to: "" for both, "item" or "lease")."""


def steps(messages: int) -> dict[str, list[Step]]:
    """The steps by request, each a callable over inputs made here once."""
    table = batch_table(messages)
    request = ipc_bytes(table.select(["message_id", "body", "born_timestamp"]))
    event_text = json.dumps({"body": base64.b64encode(request).decode(), "isBase64Encoded": True})
    event = json.loads(event_text)
    stored = parquet_bytes(table)
    signer = ReceiptSigner("columnar-bound-secret")
    handles = [
        ReceiptHandle("group", "topic", 0, offset, "lease-1", 1, NOW_MS + 60_000)
        for offset in range(messages)
    ]
    texts = [signer.encode(h) for h in handles]
    sign_each = lambda: [signer.encode(h) for h in handles]  # noqa: E731
    token = signer.encode(handles[0])
    shared = lease_handles(token, 0, messages)
    answer_table = table.select(["message_id", "body", "born_timestamp"]).append_column(
        "receipt_handle", pa.array(texts)
    )
    answer = ipc_bytes(answer_table)
    result = {"statusCode": 200, "body": base64.b64encode(answer).decode()}
    return {
        "produce": [
            ("runtime parses the event", lambda: json.loads(event_text), ""),
            ("base64 decode of the body", lambda: base64.b64decode(event["body"]), ""),
            ("IPC read", lambda: ipc.open_stream(request).read_all(), ""),
            ("bulk checks", lambda: checked(table), ""),
            ("request digest (SHA-256)", lambda: hashlib.sha256(request).digest(), ""),
            ("Parquet encode", lambda: parquet_bytes(table), ""),
        ],
        "receive": [
            ("Parquet decode", lambda: pq.ParquetFile(io.BytesIO(stored)).read(), ""),
            ("handles: one signed per message", sign_each, "item"),
            ("handles: one lease token shared", lambda: lease_handles(token, 0, messages), "lease"),
            ("IPC write of the answer", lambda: ipc_bytes(answer_table), ""),
            ("base64 encode of the answer", lambda: base64.b64encode(answer), ""),
            ("runtime writes the result", lambda: json.dumps(result), ""),
        ],
        "ack": [
            ("verify: one HMAC per handle", lambda: verified(texts), "item"),
            (
                "verify: one HMAC per lease",
                lambda: lease_offsets(ReceiptSigner("columnar-bound-secret"), shared),
                "lease",
            ),
        ],
    }


def best_ms(step: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(RUNS_PER_ROUND):
            step()
        best = min(best, (time.process_time() - started) / RUNS_PER_ROUND * 1000)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    totals = {"item": 0.0, "lease": 0.0}
    print(f"CPU ms a columnar wire format still spends on {args.messages} messages of 1 KiB:")
    for request, named in steps(args.messages).items():
        for name, step, form in named:
            ms = best_ms(step, args.rounds)
            for counted in [form] if form else list(totals):
                totals[counted] += ms
            print(f"  {request:<8} {name:<34} {ms:7.2f}")
    print(f"  total with a signed handle per message (today's form) {totals['item']:7.2f}")
    print(f"  total with one signed token per lease                 {totals['lease']:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
