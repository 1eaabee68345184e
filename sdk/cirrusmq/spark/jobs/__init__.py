"""Data pipeline jobs on the ``cirrusmq`` data source: export, stats, replay.

Each is a function taking a SparkSession (for use in a notebook or another job), a module
runnable with ``spark-submit`` / ``python -m cirrusmq.spark.jobs.<name>``, and a
``cirrusmq spark <name>`` command.
"""
