"""Spark tests: ONE local[2] SparkSession for the whole session (it takes ~10 s to start),
with the ``cirrusmq`` data source registered, against the local stack's moto server."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need pyspark ([dev] extra)")


@pytest.fixture(scope="session")
def spark(tmp_path_factory) -> Iterator[object]:
    from cirrusmq.spark import register
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers start with this venv
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("cirrusmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def topic_name() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def admin(cirrusmq_stack):
    from cirrusmq import Admin

    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as client:
        yield client


@pytest.fixture
def producer(cirrusmq_stack):
    from cirrusmq import Producer

    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials, linger_ms=1) as client:
        yield client
