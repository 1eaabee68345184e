"""``python -m cirrusmq_local.moto_serial -H HOST -p PORT``: moto's server, one request per
table or bucket at a time, with a check-then-apply ``TransactWriteItems``.

Why requests are serialised at all. moto keeps its data in plain Python dicts and its writes
are check-then-act sequences of Python statements (``Table.put_item`` evaluates the
condition, then stores; the patched ``TransactWriteItems`` checks every item, then stores
them). Threads switch between any two bytecodes, so two conditional writes to one item can
both pass their check, and a transaction is atomic only if no other write to its tables runs
between its check and its apply. Reads are not safe either: ``Query``/``Scan`` iterate a
table's dicts (``dictionary changed size during iteration`` when a write lands meanwhile),
``UpdateItem`` changes a stored item in place while a reader may be serialising it, and S3's
``ListObjectsV2`` iterates a bucket while ``PutObject`` (``If-None-Match`` is check-then-put
too) inserts into it.

What needs serialising, then, is everything on one table or one bucket — and nothing across
them: moto's tables and buckets share no mutable state except the backend's catalog (the
dict of tables / buckets, iterated by ``ListTables`` / ``ListBuckets``). :class:`ResourceLocks`
gives every request the locks of the tables or buckets it names (``TableName``, the tables of
``RequestItems`` / ``TransactItems``, a table ARN's name, the bucket of the path or host and
of ``x-amz-copy-source``), taken in sorted order (no deadlock), under a shared catalog lock.
Requests that name none, or that this does not recognise (``ListTables``, ``ListBuckets``,
PartiQL, tagging by ARN, other services, ``/moto-api``) take the catalog lock exclusively:
they run alone, as every request did before. Produce (S3 put + index transaction) and
consume (group table) requests now overlap; the transaction's table deep copy is gone
(:mod:`cirrusmq_local.moto_patches`). ``tests/local/test_stack_atomicity.py``
shows concurrent writes surviving failing transactions. Routing a request no longer lists
moto's package directory (:mod:`cirrusmq_local.moto_dispatch`).

With ``--data-dir`` the DynamoDB, S3 and KMS state survives restarts: see
:mod:`cirrusmq_local.moto_persist` (a write-ahead journal, fsync'd before each answer).

``POST /_cirrusmq/ttl`` and ``POST /_cirrusmq/lifecycle`` run the TTL and lifecycle
expirers of :mod:`cirrusmq_local.moto_expiry` in this process (the local stack calls them).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import io
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from cirrusmq_local import moto_dispatch, moto_patches
from cirrusmq_local.moto_expiry import ClockHistory, LifecycleExpirer, TtlExpirer, iter_tables
from cirrusmq_local.moto_persist import DataStore, is_mutating, is_s3, partial_on_failure

__all__ = [
    "ADMIN_PREFIX",
    "ResourceLocks",
    "SharedExclusiveLock",
    "die_with_parent",
    "main",
    "resources_of",
]

ADMIN_PREFIX = "/_cirrusmq/"
COMPACT_VAR = "CIRRUSMQ_DATA_COMPACT_BYTES"
"""With ``--data-dir``: compact the journal into a snapshot once it passes this many bytes
(default 64 MiB)."""
_DYNAMODB_TARGET = "DynamoDB_"
_TABLE_OPS = frozenset(
    {
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable",
        "CreateTable", "DeleteTable", "UpdateTable", "UpdateTimeToLive", "DescribeTimeToLive",
        "DescribeContinuousBackups", "UpdateContinuousBackups",
    }
)  # fmt: skip
_BATCH_OPS = frozenset({"BatchGetItem", "BatchWriteItem"})
_TRANSACT_OPS = frozenset({"TransactWriteItems", "TransactGetItems"})

App = Callable[..., Iterable[bytes]]


class SharedExclusiveLock:
    """Many shared holders or one exclusive holder; a waiting exclusive one goes first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class ResourceLocks:
    """One lock per table or bucket name (``dynamodb:<t>``, ``s3:<b>``) under a catalog lock."""

    def __init__(self) -> None:
        self.catalog = SharedExclusiveLock()
        self._locks: dict[str, threading.Lock] = {}
        self._mutex = threading.Lock()

    def _lock(self, name: str) -> threading.Lock:
        with self._mutex:
            return self._locks.setdefault(name, threading.Lock())

    @contextmanager
    def hold(self, names: Iterable[str] | None) -> Iterator[None]:
        """Hold the locks of ``names`` (sorted) under the shared catalog lock; ``None``: hold
        the catalog exclusively (nothing else runs)."""
        if names is None:
            with self.catalog.exclusive():
                yield
            return
        locks = [self._lock(name) for name in sorted(set(names))]
        with self.catalog.shared():
            for index, lock in enumerate(locks):
                try:
                    lock.acquire()
                except BaseException:
                    for held in reversed(locks[:index]):
                        held.release()
                    raise
            try:
                yield
            finally:
                for lock in reversed(locks):
                    lock.release()


def _table_name(name: Any) -> str:
    text = str(name)
    if text.startswith("arn:") and ":table/" in text:
        text = text.split(":table/", 1)[1].split("/", 1)[0]
    return f"dynamodb:{text}"


def _dynamodb_resources(operation: str, body: dict[str, Any]) -> list[str] | None:
    if operation in _TABLE_OPS and body.get("TableName"):
        return [_table_name(body["TableName"])]
    if operation in _BATCH_OPS and isinstance(body.get("RequestItems"), dict):
        return [_table_name(name) for name in body["RequestItems"]] or None
    if operation in _TRANSACT_OPS and isinstance(body.get("TransactItems"), list):
        names = []
        for entry in body["TransactItems"]:
            for op in entry.values() if isinstance(entry, dict) else ():
                if not isinstance(op, dict) or not op.get("TableName"):
                    return None
                names.append(_table_name(op["TableName"]))
        return names or None
    return None


def _s3_bucket(environ: dict[str, Any]) -> str | None:
    host = str(environ.get("HTTP_HOST", "")).split(":", 1)[0].lower()
    if host.endswith(".localhost") or ".s3." in host or ".s3-" in host:
        label = host.split(".", 1)[0]
        if label not in ("s3", "localhost"):
            return label  # virtual-hosted style
    segment = str(environ.get("PATH_INFO", "")).lstrip("/").split("/", 1)[0]
    return unquote(segment) or None


def resources_of(environ: dict[str, Any]) -> list[str] | None:
    """The lock names a request needs, or ``None`` when it must run alone.

    Reads (and puts back) a DynamoDB request's JSON body to find its tables."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith(_DYNAMODB_TARGET):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        if length <= 0:
            return None
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            parsed = json.loads(body)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        return _dynamodb_resources(target.split(".", 1)[-1], parsed)
    if is_s3(environ):
        bucket = _s3_bucket(environ)
        if bucket is None:
            return None
        names = [f"s3:{bucket}"]
        source = unquote(str(environ.get("HTTP_X_AMZ_COPY_SOURCE", ""))).lstrip("/")
        if source:
            names.append(f"s3:{source.split('/', 1)[0]}")
        return names
    return None


class Serialised:
    """WSGI middleware: each request runs (and its body is produced) under the locks of the
    tables/buckets it touches (:func:`resources_of`); ``/_cirrusmq/*`` runs the expirers."""

    def __init__(
        self, app: App, locks: ResourceLocks | None = None, store: DataStore | None = None
    ) -> None:
        self._app = app
        self.locks = locks or ResourceLocks()
        self.store = store
        self._admin = _Admin(self.locks, store)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if str(environ.get("PATH_INFO", "")).startswith(ADMIN_PREFIX):
            return self._admin(environ, start_response)
        store = self.store
        mode = is_mutating(environ) if store is not None else None
        if store is None or mode is None:
            with self.locks.hold(resources_of(environ)):
                return list(self._app(environ, start_response))
        entry = store.capture(environ)
        names = resources_of(environ) if mode == "journal" else None  # KMS: run alone
        statuses: list[str] = []

        def recording_start_response(status: str, *args: Any) -> Any:
            statuses.append(status)
            return start_response(status, *args)

        with self.locks.hold(names):
            answer = list(self._app(environ, recording_start_response))
            if statuses and (statuses[0].startswith(("2", "3")) or partial_on_failure(environ)):
                # durable before the client hears of it; under the locks: in apply order
                if mode == "journal":
                    store.note_answer(entry, answer)
                    store.record(entry)
                else:
                    store.snapshot()
        if mode == "journal" and store.journal_size() > store.compact_bytes:
            with self.locks.hold(None):
                if store.journal_size() > store.compact_bytes:
                    store.snapshot()
        return answer


class _Admin:
    """``POST /_cirrusmq/ttl`` ``{"now_s", "budget", "tables"?}`` and ``POST
    /_cirrusmq/lifecycle`` ``{"bucket", "rules", "now_ms", "clock_history", "budget"}``."""

    def __init__(self, locks: ResourceLocks, store: DataStore | None = None) -> None:
        self.locks = locks
        self.store = store
        self._ttl: dict[tuple[str, str], TtlExpirer] = {}
        self._lifecycle: dict[str, LifecycleExpirer] = {}
        self._mutex = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            request = json.loads(environ["wsgi.input"].read(length) or b"{}")
            action = str(environ["PATH_INFO"])[len(ADMIN_PREFIX) :]
            if environ.get("REQUEST_METHOD") != "POST" or action not in ("ttl", "lifecycle"):
                status, answer = "404 Not Found", {"error": f"no {action}"}
            else:
                handler = self._run_ttl if action == "ttl" else self._run_lifecycle
                status, answer = "200 OK", handler(request)
        except Exception as exc:  # noqa: BLE001 - answered, not raised into werkzeug
            status, answer = "500 Internal Server Error", {"error": repr(exc)}
        data = json.dumps(answer).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]

    def _run_ttl(self, request: dict[str, Any]) -> dict[str, Any]:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        account = request.get("account", DEFAULT_ACCOUNT_ID)
        region = request.get("region", "us-east-1")
        backend = dynamodb_backends[account][region]
        with self._mutex:
            expirer = self._ttl.setdefault(
                (account, region),
                TtlExpirer(
                    backend,
                    lambda name: self.locks.hold([_table_name(name)]),
                    on_delete=self._journal_ttl(account, region),
                ),
            )
        tables = request.get("tables") or list(iter_tables(backend))
        budget = int(request.get("budget", 5000))
        return {
            "tables": {
                name: expirer.run(name, float(request["now_s"]), budget).as_dict()
                for name in tables
            }
        }

    def _journal_ttl(self, account: str, region: str) -> Callable[..., None] | None:
        store = self.store
        if store is None:
            return None

        def record(table: str, hash_key: Any, range_key: Any) -> None:
            store.record_deletion(
                {
                    "kind": "ttl",
                    "account": account,
                    "region": region,
                    "table": table,
                    "hash": hash_key,
                    "range": range_key,
                }  # fmt: skip
            )

        return record

    def _journal_s3_delete(self, account: str) -> Callable[..., None] | None:
        store = self.store
        if store is None:
            return None

        def record(bucket: str, key: str) -> None:
            store.record_deletion(
                {
                    "kind": "s3-delete",
                    "account": account,
                    "partition": "global",
                    "bucket": bucket,
                    "key": key,
                }  # fmt: skip
            )

        return record

    def _run_lifecycle(self, request: dict[str, Any]) -> dict[str, Any]:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        account = request.get("account", DEFAULT_ACCOUNT_ID)
        backend = s3_backends[account]["global"]
        with self._mutex:
            expirer = self._lifecycle.setdefault(
                account,
                LifecycleExpirer(
                    backend,
                    lambda name: self.locks.hold([f"s3:{name}"]),
                    on_delete=self._journal_s3_delete(account),
                ),
            )
        result = expirer.run(
            request["bucket"],
            request.get("rules") or [],
            int(request["now_ms"]),
            ClockHistory(request.get("clock_history") or []),
            int(request.get("budget", 5000)),
        )
        if result.deleted:
            reclaim_memory()
        return result.as_dict()


_last_reclaim = 0.0


def reclaim_memory(min_interval: float = 30.0) -> None:
    """Give memory freed by expiry back to the system: collect reference cycles (deleted S3
    keys hold their bodies; full collections are rare in a process this size) and, with
    glibc, ``malloc_trim``. At most every ``min_interval`` seconds."""
    global _last_reclaim
    now = time.monotonic()
    if now - _last_reclaim < min_interval:
        return
    _last_reclaim = now
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc
            ctypes.CDLL(None).malloc_trim(0)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, *, pdeathsig: bool, interval: float = 0.25) -> None:
    """End this process when ``parent_pid`` (the process that started it) dies, however it
    dies (``kill -9`` included): on Linux the kernel sends SIGKILL (``PR_SET_PDEATHSIG``,
    when ``pdeathsig``: only if the thread that spawned us lives as long as its process),
    and everywhere a watcher thread notices the parent change (``os.getppid()``)."""
    if pdeathsig and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watcher remains
            pass

    def orphaned() -> bool:
        return os.getppid() != parent_pid

    if orphaned():  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while not orphaned():
            time.sleep(interval)
        os._exit(1)  # no cleanup to do: memory only, or a data dir fsync'd per answer

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="Exit when this process (our parent) dies."
    )
    parser.add_argument(
        "--pdeathsig", action="store_true", help="With --parent-pid: also PR_SET_PDEATHSIG."
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Keep DynamoDB, S3 and KMS state in this folder (journal + snapshot) across "
        "restarts; without it everything lives in memory only.",
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid, pdeathsig=args.pdeathsig)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from moto.moto_server.threaded_moto_server import (
        DomainDispatcherApplication,
        create_backend_app,
    )
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import run_simple

    moto_patches.apply()
    moto_dispatch.apply()
    # one access-log line per request cost ~10% of the server's CPU under load (profiled)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = DomainDispatcherApplication(create_backend_app)
    store = None
    if args.data_dir is not None:
        compact = os.environ.get(COMPACT_VAR)
        store = DataStore(args.data_dir, **({"compact_bytes": int(compact)} if compact else {}))
        store.restore(app)  # before the port opens: nobody sees a half-restored state
    run_simple(
        args.host,
        args.port,
        Serialised(app, store=store),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
