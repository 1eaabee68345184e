"""The web console: static files served unsigned at ``/console/`` by the admin function.

The files live next to this package (``cirrusmq_api/console/``), so they ship with the API
layer. Only the files found there at import are served (no path from the request reaches
the file system). Every answer carries a strict Content-Security-Policy: scripts, styles and
API calls from this origin only, no inline code, no frames; the console's own code signs
each API call in the browser (the secret never leaves the tab).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

router = APIGatewayHttpRouter()

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
PREFIX = "/console"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def is_console_path(method: str, path: str) -> bool:
    """True for a ``GET`` of the root, the console's page and its files (served without a
    signature)."""
    return method.upper() == "GET" and (path in ("/", PREFIX) or path.startswith(PREFIX + "/"))


@functools.cache
def console_files() -> dict[str, tuple[str, str]]:
    """File name → (content type, text) of every servable console file."""
    files: dict[str, tuple[str, str]] = {}
    if CONSOLE_DIR.is_dir():
        for path in sorted(CONSOLE_DIR.iterdir()):
            content_type = CONTENT_TYPES.get(path.suffix)
            if path.is_file() and content_type:
                files[path.name] = (content_type, path.read_text(encoding="utf-8"))
    return files


def _serve(name: str) -> Response:
    found = console_files().get(name)
    if found is None:
        body = {"code": "RouteNotFound", "message": f"no console file {name[:100]!r}"}
        return Response(404, content_types.APPLICATION_JSON, json.dumps(body))
    content_type, text = found
    return Response(200, content_type, text, headers=dict(SECURITY_HEADERS))


@router.get(PREFIX, include_in_schema=False)
@router.get(PREFIX + "/", include_in_schema=False)
def console_index():  # noqa: ANN201 (no return annotation: Powertools would validate it)
    """The page, at ``/console`` and ``/console/`` alike (its files are named absolutely)."""
    return _serve("index.html")


@router.get(PREFIX + "/<name>", include_in_schema=False)
def console_file(name: str):  # noqa: ANN201 (as above)
    return _serve(name)
