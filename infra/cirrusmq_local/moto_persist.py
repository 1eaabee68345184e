"""A moto server whose DynamoDB, S3 and KMS state survives restarts: a write-ahead journal of
the mutating requests plus a pickled snapshot of moto's backends, in one data directory.

Acknowledged means durable. :class:`~cirrusmq_local.moto_serial.Serialised` runs each request
under the locks of its tables/buckets; when a mutating DynamoDB or S3 request succeeded, its
method, path, query, headers and body are appended to ``journal.bin`` and fsync'd *before*
the answer leaves (still under those locks, so the journal holds each table's and bucket's
writes in the order they were applied). Requests that failed changed nothing and are not
journaled, except a failed ``BatchWriteItem`` (moto stores its puts up to the item it
refuses; the replay refuses it the same way). On start the snapshot is loaded and the
journal replayed through moto's own WSGI app, one request at a time, with moto's clock
(``utcnow``) set to each request's original time: S3 ``LastModified`` and DynamoDB's
table/stream timestamps come back the same, and conditional writes on one table see the
same items in the same order, so they have the same outcome.
Then a new snapshot is written and the journal emptied (compaction); while running, a
journal grown past ``compact_bytes`` is compacted the same way.

What a request replay cannot reproduce is randomness. A multipart upload's id is drawn at
random: its journal record keeps the id moto answered, and the replay renames the upload it
starts to it. A KMS key's id and material are drawn at random too (and cannot be renamed
after the fact): a mutating KMS request runs alone (the catalog lock) and is followed by a
snapshot, not a journal entry. The TTL and lifecycle expirers delete inside this process,
not through requests; each deletion is journaled as such (``ttl`` / ``s3-delete`` entries),
under the table's or bucket's lock so it keeps its place among the writes.

Every record is ``length, crc32, pickle``; a torn or corrupt tail (a write that was never
answered) ends the replay and is cut off. A bad record with good ones after it ends the
replay too, but the journal is first copied to ``journal.bin.damaged-<time>`` (it may be
damage to the disk, and what follows acknowledged writes). An unreadable snapshot stops
the start with an error naming it. Records carry a sequence number and the snapshot
the last one it contains, so a crash between writing a snapshot and emptying the journal
replays nothing twice. Only DynamoDB, S3 and KMS are kept: CloudWatch metrics, logs and the
other services moto emulates start empty.
"""

from __future__ import annotations

import copyreg
import datetime
import io
import logging
import os
import pickle
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["DataStore", "is_mutating", "is_s3", "partial_on_failure", "restore_keys_pickling"]

log = logging.getLogger(__name__)

JOURNAL = "journal.bin"
SNAPSHOT = "snapshot.pickle"
_HEADER = struct.Struct("<II")
_DYNAMODB_READS = frozenset(
    {
        "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable",
        "ListTables", "DescribeTimeToLive", "DescribeContinuousBackups", "ListTagsOfResource",
        "DescribeEndpoints", "DescribeLimits", "ListBackups", "DescribeBackup",
        "ListExports", "DescribeExport", "ListGlobalTables", "DescribeGlobalTable",
        "DescribeKinesisStreamingDestination", "DescribeTableReplicaAutoScaling",
        "GetResourcePolicy", "ListImports", "DescribeImport", "ListContributorInsights",
        "DescribeContributorInsights",
    }
)  # fmt: skip
_KMS_READ_PREFIXES = (
    "Describe", "List", "Get", "Encrypt", "Decrypt", "ReEncrypt", "GenerateDataKey",
    "GenerateRandom", "GenerateMac", "Sign", "Verify",
)  # fmt: skip
_KEPT_ENVIRON = ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE", "CONTENT_LENGTH")
_SERVICES = ("dynamodb", "s3", "kms")


def is_mutating(environ: dict[str, Any]) -> str | None:
    """``"journal"`` for a DynamoDB or S3 request that may change state, ``"snapshot"`` for
    such a KMS request, None for reads and for services that are not kept."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith("DynamoDB_"):
        return None if target.split(".", 1)[-1] in _DYNAMODB_READS else "journal"
    if target.startswith("TrentService."):
        return None if target.split(".", 1)[-1].startswith(_KMS_READ_PREFIXES) else "snapshot"
    if is_s3(environ):
        return "journal" if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE") else None
    return None


def partial_on_failure(environ: dict[str, Any]) -> bool:
    """Whether a failed answer may still have changed state: moto stores a BatchWriteItem's
    puts up to the item it refuses. Journaled anyway, its replay refuses the same item
    after the same puts (moto is deterministic there)."""
    return str(environ.get("HTTP_X_AMZ_TARGET", "")).endswith(".BatchWriteItem")


def is_s3(environ: dict[str, Any]) -> bool:
    """Whether moto's dispatcher sends this request to S3: signed with SigV4 for ``s3``,
    signed with SigV2 (an ``AWS`` header or ``AWSAccessKeyId`` in the query: only S3 still
    takes it), or unsigned without an ``X-Amz-Target``, a query-protocol form or a
    ``/moto-api`` path (moto's default service for those is S3)."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    query = str(environ.get("QUERY_STRING", ""))
    if auth.startswith("AWS4-") or "X-Amz-Credential=" in query:
        return "/s3/aws4_request" in auth + query or "%2Fs3%2Faws4_request" in query
    if auth.startswith("AWS ") or "AWSAccessKeyId=" in query:
        return True
    if auth or environ.get("HTTP_X_AMZ_TARGET"):
        return False
    content_type = str(environ.get("CONTENT_TYPE", ""))
    path = str(environ.get("PATH_INFO", ""))
    return not content_type.startswith("application/x-www-form-urlencoded") and not (
        path.startswith(("/moto-api", "/latest/", "/_cirrusmq/")) or path == "/favicon.ico"
    )


def restore_keys_pickling() -> None:
    """Teach pickle the private keys KMS keys hold (cryptography's Rust objects): as DER."""
    from cryptography.hazmat.bindings._rust import openssl
    from cryptography.hazmat.primitives import serialization

    def reduce(key: Any) -> tuple[Any, tuple[bytes]]:
        der = key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return _load_private_key, (der,)

    for name in ("rsa.RSAPrivateKey", "ec.ECPrivateKey", "ed25519.Ed25519PrivateKey"):
        module, cls = name.split(".")
        key_type = getattr(getattr(openssl, module, None), cls, None)
        if key_type is not None:
            copyreg.pickle(key_type, reduce)


def _load_private_key(der: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_der_private_key(der, None)


def _backend_dicts() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends
    from moto.kms.models import kms_backends
    from moto.s3.models import s3_backends

    return {"dynamodb": dynamodb_backends, "s3": s3_backends, "kms": kms_backends}


class _FrozenClock:
    """Sets moto's ``utcnow`` (where DynamoDB and S3 read it) to a given time while replaying."""

    _MODULES = ("moto.core.utils", "moto.s3.models", "moto.dynamodb.models.table")

    def __init__(self) -> None:
        import moto.core.utils

        self._original = moto.core.utils.utcnow
        self.at: datetime.datetime | None = None

    def now(self) -> datetime.datetime:
        return self.at if self.at is not None else self._original()

    def install(self) -> Callable[[], None]:
        patched = [sys.modules[name] for name in self._MODULES if name in sys.modules]
        for module in patched:
            module.utcnow = self.now  # type: ignore[attr-defined]

        def undo() -> None:
            for module in patched:
                module.utcnow = self._original  # type: ignore[attr-defined]

        return undo


class DataStore:
    """The data directory of one moto server: :meth:`restore` at start, then
    :meth:`record` / :meth:`record_deletion` / :meth:`snapshot` while serving."""

    def __init__(self, directory: str | Path, *, compact_bytes: int = 64 << 20) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.compact_bytes = compact_bytes
        self._mutex = threading.Lock()
        self._seq = 0
        self._fd: int | None = None
        self.replayed = 0
        self._lock_file = _lock_directory(self.directory)
        restore_keys_pickling()

    # ------------------------------------------------------------------ start
    def restore(self, app: Callable[..., Iterable[bytes]]) -> None:
        """Load the snapshot, replay the journal through ``app``, compact, open the journal."""
        snapshot_seq = self._load_snapshot()
        self._seq = snapshot_seq
        entries = list(self._read_journal())
        clock = _FrozenClock()
        undo = clock.install()
        try:
            for entry in entries:
                if entry["seq"] <= snapshot_seq:
                    continue
                clock.at = datetime.datetime.fromtimestamp(entry["t"], datetime.UTC).replace(
                    tzinfo=None
                )
                self._apply(app, entry)
                self._seq = entry["seq"]
                self.replayed += 1
        finally:
            undo()
        if self.replayed or not (self.directory / SNAPSHOT).exists():
            self._write_snapshot()
        self._open_journal(truncate=True)
        log.info("data dir %s: %d journaled requests replayed", self.directory, self.replayed)

    def _load_snapshot(self) -> int:
        path = self.directory / SNAPSHOT
        if not path.exists():
            return 0
        try:
            with path.open("rb") as file:
                state = pickle.load(file)  # noqa: S301 - our own file in the user's data dir
            int(state["seq"]), state["backends"].items()
        except Exception as exc:  # noqa: BLE001 - any unreadable snapshot: one clear error
            raise RuntimeError(
                f"data dir {self.directory}: cannot read {path} ({exc!r}); move the data dir "
                "away to start empty, or start with --ephemeral"
            ) from exc
        for service, backends in _backend_dicts().items():
            for account, regions in state["backends"].get(service, {}).items():
                for region, backend in regions.items():
                    backends[account][region] = backend
        return int(state["seq"])

    def _read_journal(self) -> Iterator[dict[str, Any]]:
        path = self.directory / JOURNAL
        if not path.exists():
            return
        data = path.read_bytes()
        position = 0
        while position + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, position)
            body = data[position + _HEADER.size : position + _HEADER.size + length]
            if not length or len(body) < length or zlib.crc32(body) != crc:
                break  # records are never empty: a zero-filled tail is torn too
            try:
                entry = pickle.loads(body)  # noqa: S301 - our own file
            except Exception:  # noqa: BLE001 - a record that does not load ends the replay
                break
            yield entry
            position += _HEADER.size + length
        if position < len(data) and self._good_after(data, position):
            kept = path.with_name(f"{JOURNAL}.damaged-{int(time.time())}")
            kept.write_bytes(data)
            log.error(
                "journal %s: a damaged record at byte %d with good ones after it; the replay "
                "stops there, the whole journal is kept in %s",
                path,
                position,
                kept,
            )
        elif position < len(data):
            log.warning("journal %s: %d torn bytes at the end cut off", path, len(data) - position)

    @staticmethod
    def _good_after(data: bytes, start: int) -> bool:
        """Whether a whole record (length, crc32, body) starts anywhere after ``start``:
        only a tail can be torn, so a bad record before a good one is damage or a crash
        between unsynced appends."""
        for position in range(start + 1, len(data) - _HEADER.size):
            length, crc = _HEADER.unpack_from(data, position)
            end = position + _HEADER.size + length
            if (
                length
                and end <= len(data)
                and zlib.crc32(data[position + _HEADER.size : end]) == crc
            ):
                return True
        return False

    def _apply(self, app: Callable[..., Iterable[bytes]], entry: dict[str, Any]) -> None:
        kind = entry["kind"]
        backends = _backend_dicts()
        if kind == "request":
            environ = _environ(entry)
            statuses: list[str] = []
            answer = list(app(environ, lambda status, headers, *_: statuses.append(status)))
            if statuses and not statuses[0].startswith(("2", "3")):
                log.warning("replayed %s %s: %s", entry["m"], entry["p"], statuses[0])
            if entry.get("upload_id"):
                _rename_upload(backends["s3"], upload_id(answer), entry["upload_id"])
        elif kind == "ttl":
            table = backends["dynamodb"][entry["account"]][entry["region"]].tables.get(
                entry["table"]
            )
            if table is not None:
                table.delete_item(entry["hash"], entry["range"])
        elif kind == "s3-delete":
            backend = backends["s3"][entry["account"]][entry["partition"]]
            if entry["bucket"] in backend.buckets:
                backend.delete_object(entry["bucket"], entry["key"])

    # ---------------------------------------------------------------- serving
    def capture(self, environ: dict[str, Any]) -> dict[str, Any]:
        """The request's parts a replay needs (puts its body back for the app to read)."""
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > 0:
            body = environ["wsgi.input"].read(length)
        elif environ.get("wsgi.input_terminated"):  # chunked: werkzeug ends the stream
            body = environ["wsgi.input"].read()
        else:
            body = b""
        environ["wsgi.input"] = io.BytesIO(body)
        headers = {k: v for k, v in environ.items() if k.startswith("HTTP_") and isinstance(v, str)}
        headers.update({k: str(environ.get(k, "")) for k in _KEPT_ENVIRON})
        return {"kind": "request", "m": environ.get("REQUEST_METHOD"),
                "p": environ.get("PATH_INFO"), "h": headers, "b": body}  # fmt: skip

    @staticmethod
    def note_answer(entry: dict[str, Any], answer: list[bytes]) -> None:
        """Keep what moto drew at random for a request and a replay must reuse: the id of a
        multipart upload it started (later parts and the completion name it)."""
        if entry["m"] == "POST" and "uploads" in entry["h"].get("QUERY_STRING", ""):
            entry["upload_id"] = upload_id(answer)

    def record(self, entry: dict[str, Any], *, sync: bool = True) -> None:
        """Append ``entry`` (with a sequence number and the wall time); ``sync``: fsync it
        before returning."""
        with self._mutex:
            assert self._fd is not None, "restore() first"
            self._seq += 1
            entry = {**entry, "seq": self._seq, "t": entry.get("t", time.time())}
            body = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            os.write(self._fd, _HEADER.pack(len(body), zlib.crc32(body)) + body)
            fd = self._fd
        if sync:
            os.fsync(fd)  # one fsync covers every record written before it

    def record_deletion(self, entry: dict[str, Any]) -> None:
        """An expirer's deletion: journaled (not synced; it was never acknowledged)."""
        self.record(entry, sync=False)

    def journal_size(self) -> int:
        return os.fstat(self._fd).st_size if self._fd is not None else 0

    def snapshot(self) -> None:
        """Write a snapshot of every kept backend and empty the journal. The caller makes
        sure no request runs meanwhile."""
        with self._mutex:
            self._write_snapshot()
            self._open_journal(truncate=True)

    def _write_snapshot(self) -> None:
        state = {
            "seq": self._seq,
            "backends": {
                service: {account: dict(regions.items()) for account, regions in backends.items()}
                for service, backends in _backend_dicts().items()
            },
        }
        path = self.directory / SNAPSHOT
        temporary = path.with_suffix(".tmp")
        with temporary.open("wb") as file:
            pickle.dump(state, file, protocol=pickle.HIGHEST_PROTOCOL)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        _fsync_directory(self.directory)

    def _open_journal(self, *, truncate: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd = os.open(self.directory / JOURNAL, flags, 0o600)
        os.fsync(self._fd)
        _fsync_directory(self.directory)

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def upload_id(answer: Iterable[bytes]) -> str | None:
    """The ``UploadId`` of a ``CreateMultipartUpload`` answer."""
    text = b"".join(answer)
    start = text.find(b"<UploadId>")
    end = text.find(b"</UploadId>", start)
    if start < 0 or end < 0:
        return None
    return text[start + len(b"<UploadId>") : end].decode()


def _rename_upload(s3_backends: Any, drawn: str | None, recorded: str) -> None:
    """Give the multipart upload a replay started (id ``drawn``) its original id."""
    if drawn is None or drawn == recorded:
        return
    for regions in s3_backends.values():
        for backend in {id(b): b for b in regions.values()}.values():
            for bucket in backend.buckets.values():
                multipart = bucket.multiparts.pop(drawn, None)
                if multipart is not None:
                    multipart.id = recorded
                    bucket.multiparts[recorded] = multipart
                    return


def _environ(entry: dict[str, Any]) -> dict[str, Any]:
    environ: dict[str, Any] = dict(entry["h"])
    environ.update(
        {
            "wsgi.input": io.BytesIO(entry["b"]),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,  # the body is all there, chunked or not
            "SERVER_NAME": "localhost",
            "SERVER_PORT": os.environ.get("MOTO_PORT", "5000"),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "SCRIPT_NAME": "",
            "REMOTE_ADDR": "127.0.0.1",
        }
    )
    return environ


def _lock_directory(directory: Path, wait: float = 15.0) -> Any:
    """Hold ``directory/lock`` (flock) while this process lives: one server per data dir.
    Waits ``wait`` seconds for a killed predecessor to be gone."""
    import fcntl
    import time

    file = (directory / "lock").open("a")
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return file
        except BlockingIOError:
            if time.monotonic() > deadline:
                file.close()
                raise RuntimeError(f"data dir {directory} is in use by another server") from None
            time.sleep(0.1)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
