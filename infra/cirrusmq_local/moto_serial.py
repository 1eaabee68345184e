"""``python -m cirrusmq_local.moto_serial -H HOST -p PORT``: moto's server, one request at a time.

moto's DynamoDB ``TransactWriteItems`` backs up the whole table before it starts and, when a
condition fails, puts that backup back — erasing whatever other requests committed in the
meantime. Under concurrency that silently loses acknowledged writes (a log index item, so
two batches end up at one offset); real DynamoDB never does. Serving one request at a time
restores the atomicity the broker relies on, at little cost: moto is CPU-bound under one GIL
either way. ``tests/integration/test_local_stack_atomicity.py`` shows the loss and the fix.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import DomainDispatcherApplication, create_backend_app
from moto.moto_server.werkzeug_app import MotoRequestHandler
from werkzeug.serving import run_simple


class OneAtATime:
    """WSGI middleware: requests are handled (and their bodies produced) under one lock."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            return list(self._app(environ, start_response))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        OneAtATime(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
