"""Run moto's server as a subprocess (its own GIL, apart from the handlers).

It runs as :mod:`cirrusmq_local.moto_serial`: requests on one table or bucket one at a time
(moto's check-then-write code is not atomic under threads), ``TransactWriteItems`` patched to
check-then-apply without moto's table snapshot (which lost concurrent writes), and the local
TTL/lifecycle expirers (see that module).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import IO, Any

__all__ = ["DUMMY_CREDENTIALS", "MotoServer", "MotoServerError", "free_port"]

# moto accepts any credentials; botocore just needs some to sign with.
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
REGION = "us-east-1"


class MotoServerError(RuntimeError):
    """moto server could not be started."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """``python -m moto.server`` on ``host``: start(), ``url``, stop(). A context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        *,
        startup_timeout: float = 20.0,
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        self.data_dir = data_dir
        """Where the server keeps its DynamoDB, S3 and KMS state across restarts
        (:mod:`cirrusmq_local.moto_persist`); None: in memory only."""
        # replaying a long journal takes a while before the server answers
        self.startup_timeout = startup_timeout if data_dir is None else max(startup_timeout, 600)
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """Endpoint URL of the running server, e.g. ``http://127.0.0.1:50123``."""
        if self.port is None:
            raise MotoServerError("moto server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the server, while it runs."""
        return None if self._process is None else self._process.pid

    def start(self, attempts: int = 3) -> MotoServer:
        """Start the server on a free port and wait until it answers HTTP."""
        if self._process is not None:
            return self
        error: Exception | None = None
        for _ in range(attempts):  # a free port can be taken between probe and bind
            try:
                self._spawn(free_port(self.host))
                atexit.register(self.stop)
                return self
            except MotoServerError as exc:
                error = exc
                self.stop()
        raise MotoServerError(f"moto server did not start: {error}")

    def _spawn(self, port: int) -> None:
        env = dict(os.environ)
        env.update(
            AWS_ACCESS_KEY_ID=DUMMY_CREDENTIALS["aws_access_key_id"],
            AWS_SECRET_ACCESS_KEY=DUMMY_CREDENTIALS["aws_secret_access_key"],
            AWS_DEFAULT_REGION=REGION,
            MOTO_PORT=str(port),  # moto builds some URLs from it; never inherit a stale one
        )
        env.pop("AWS_ENDPOINT_URL", None)
        self._log = tempfile.TemporaryFile(prefix="cirrusmq-moto-")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "-m", "cirrusmq_local.moto_serial", "-H", self.host]
        # It dies with this process, whatever kills it (kill -9 included). PR_SET_PDEATHSIG
        # fires when the spawning *thread* ends, so only a main-thread spawn asks for it;
        # the child's parent watcher covers every case.
        command += ["-p", str(port), "--parent-pid", str(os.getpid())]
        if self.data_dir is not None:
            command += ["--data-dir", os.fspath(self.data_dir)]
        if threading.current_thread() is threading.main_thread():
            command.append("--pdeathsig")
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # Ctrl-C in a terminal must not kill it before we stop
        )
        self.port = port
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        probe = f"{self.url}/moto-api/data.json"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise MotoServerError(
                    f"exited with status {self._process.returncode}: {self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(probe, timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise MotoServerError(f"no answer within {self.startup_timeout:g} s: {self._log_tail()}")

    def _log_tail(self, size: int = 2000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - size))
        return self._log.read().decode(errors="replace").strip()

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout``); idempotent."""
        process, self._process = self._process, None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        self.port = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
