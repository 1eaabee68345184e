"""The ``local`` profile that ``cirrusmq dev`` writes carries its stack's Spark data source
options: ``cirrusmq.spark.options_from_profile("local")`` equals ``stack.spark_options()``."""

from __future__ import annotations

from cirrusmq.cli import write_local_profile
from cirrusmq.config import load_config
from cirrusmq.spark import options_from_profile


def test_the_local_profile_holds_the_stacks_spark_options(cirrusmq_stack, tmp_path, monkeypatch):
    path = tmp_path / "config"
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(path))
    for name in ("CIRRUSMQ_ENDPOINT", "CIRRUSMQ_ACCESS_KEY", "CIRRUSMQ_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    assert write_local_profile(cirrusmq_stack) == path
    options = options_from_profile("local")
    assert options == cirrusmq_stack.spark_options()
    assert options["endpoint"] == cirrusmq_stack.aws_endpoint
    assert options["bucket"] == cirrusmq_stack.resources["MessageBucket"]
    config = load_config()  # the profile still serves the CLI
    assert (config.endpoint, config.profile) == (cirrusmq_stack.endpoint, "local")
