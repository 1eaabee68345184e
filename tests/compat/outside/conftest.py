"""The outside suites run in their own venvs (``make test-compat``), never in the project's."""

collect_ignore = ["localstack"]
