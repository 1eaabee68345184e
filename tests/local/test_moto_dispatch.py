"""The local moto server routes each request without listing moto's package directory
(moto's own lookup lists it and stats ~180 entries per request)."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest
from cirrusmq_local import moto_dispatch, moto_serial
from moto import backends
from moto.moto_server.threaded_moto_server import (
    DomainDispatcherApplication,
    create_backend_app,
)

HOSTS = ("s3", "dynamodb", "moto_api", "localhost:5000", "127.0.0.1:4566", None)


@pytest.fixture
def reverted():
    yield
    moto_dispatch.revert()


def test_hosts_route_as_before_without_touching_the_filesystem(reverted, monkeypatch) -> None:
    app = DomainDispatcherApplication(create_backend_app)
    expected = {host: app.get_backend_for_host(host) for host in HOSTS}
    assert expected["s3"] == "s3" and expected["localhost:5000"] is None

    moto_dispatch.apply()

    def no_listing(path: Any) -> list[str]:
        raise AssertionError(f"listed {path} while routing a request")

    monkeypatch.setattr(os, "listdir", no_listing)
    monkeypatch.setattr(os, "scandir", no_listing)
    monkeypatch.setattr(os.path, "isdir", no_listing)
    assert {host: app.get_backend_for_host(host) for host in HOSTS} == expected


def test_the_server_entry_point_installs_it(reverted, monkeypatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr("werkzeug.serving.run_simple", lambda *args, **kw: served.append(args))
    monkeypatch.setattr(moto_serial.moto_patches, "apply", lambda: None)
    monkeypatch.setattr(moto_serial.signal, "signal", lambda *args: None)
    monkeypatch.setenv("MOTO_PORT", "0")
    monkeypatch.setattr(logging.getLogger("werkzeug"), "setLevel", lambda level: None)
    moto_serial.main(["--port", "0"])
    assert served, "the server did not start"
    assert backends.list_of_moto_modules is not moto_dispatch._ORIGINAL
