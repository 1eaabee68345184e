"""The function-URL front door's route table, generated from template.yaml.

``python -m cirrusmq_local.front_door [template.yaml]`` (``make front-door-routes``) writes
``routes.json`` beside the front door's handler: per function with HttpApi events, its code
directory (relative to the front door's ``CodeUri``), its handler and its route keys. The
front door reads it on AWS and locally alike (:func:`cirrusmq_api.front_door.load_route_table`);
tests/deploy/test_front_door.py checks that the file says what the template says.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from cirrusmq_local.template import Function, Template, TemplateError, load_template

__all__ = ["front_door_function", "render", "route_table", "table_path"]


def front_door_function(template: Template) -> Function:
    """The template's one function with a function URL."""
    found = [fn for fn in template.functions.values() if fn.function_url]
    if len(found) != 1:
        raise TemplateError(f"expected one function with a FunctionUrlConfig, found {len(found)}")
    return found[0]


def table_path(template: Template) -> Path:
    """Where the front door's handler reads its route table: ``routes.json`` beside it."""
    front = front_door_function(template)
    module_path = front.handler.rpartition(".")[0]
    return front.code_uri.joinpath(*module_path.split(".")).parent / "routes.json"


def route_table(template: Template) -> dict[str, Any]:
    """The routes of every function with HttpApi events, by function logical id."""
    front = front_door_function(template)
    functions: dict[str, Any] = {}
    for fn in template.functions.values():
        if not fn.http_routes:
            continue
        try:
            code = fn.code_uri.relative_to(front.code_uri)
        except ValueError:
            raise TemplateError(
                f"{fn.logical_id}: CodeUri {fn.code_uri} is not under the front door's"
                f" {front.code_uri}: its handler would not be in the front door's package"
            ) from None
        functions[fn.logical_id] = {
            "code": code.as_posix(),
            "handler": fn.handler,
            "routes": [route.route_key for route in fn.http_routes],
        }
    return {"functions": functions}


def render(template: Template) -> str:
    """The text of ``routes.json``."""
    return json.dumps(route_table(template), indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    template = load_template(args[0] if args else Path(os.getcwd()) / "template.yaml")
    path = table_path(template)
    path.write_text(render(template))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
