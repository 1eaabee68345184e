"""A ``spark-submit``-able entry point for the jobs (absolute imports, run as a file):

    spark-submit "$(python -c 'import cirrusmq.spark.jobs.run as m; print(m.__file__)')" \\
        export --topic orders --output s3a://lake/orders --options-file aws.json
"""

from __future__ import annotations

import sys

from cirrusmq.spark.jobs import export, replay, stats

JOBS = {"export": export.main, "stats": stats.main, "replay": replay.main}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in JOBS:
        print(f"usage: run.py {{{','.join(JOBS)}}} [options]  (each job's --help)")
        return 2
    return JOBS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
