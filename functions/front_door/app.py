"""FrontDoorFunction: every route of the HTTP API behind one function URL (FrontDoor=function-url).

``routes.json`` (generated from template.yaml) names each route's function and handler; the
handlers are the six HTTP functions' own, imported from their folders beside this one.
"""

from pathlib import Path

from cirrusmq_api.front_door import load_route_table

HERE = Path(__file__).resolve().parent
app = load_route_table(HERE / "routes.json", functions_dir=HERE.parent)


def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
