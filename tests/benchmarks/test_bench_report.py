"""The benchmark report: the page and charts from fixed inputs, and the steps' wiring."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bench_report
import pytest
from bench_report import STEPS, Step, write_report

HERE = Path(__file__).resolve().parent


def stamp(load: float) -> dict[str, object]:
    return {"utc": "2026-12-02 02:30 UTC", "cores": 2, "load": load}


def record(data: dict[str, object]) -> dict[str, object]:
    return {"start": stamp(8.5), "end": stamp(9.25), "seconds": 42, "arguments": ["--x", "1"]}


def with_data(data: dict[str, object]) -> dict[str, object]:
    return {**record(data), "data": data}


def latency(p50: float, p99: float) -> dict[str, float]:
    return {"requests": 5, "p50_ms": p50, "p99_ms": p99, "max_ms": p99}


CORE = {
    "prices": "AWS list prices, us-east-1, as of 2026-12-02",
    "memory_mb": 1024,
    "sqs_best": 0.12,
    "profiles": {"default": "the template's defaults", "steady": "provisioned"},
    "batches": [
        {
            "batch": batch,
            "messages": 1000,
            "profiles": {
                name: {
                    "components": {},
                    "total": total / batch,
                    "without_lambda_duration": total / batch / 2,
                    "aws_lambda_duration": (total / batch / 4, total / batch),
                    "goal": total / batch if batch == 100 else None,
                }
                for name, total in (("default", 12.5), ("steady", 8.25))
            },
            "sqs_same_batch": 1.2 if batch == 1 else 0.12,
            "design_floor": 7.0 / batch,
            "requests_per_1000": 3000 / batch,
            "produce_rate": 100.0,
            "consume_rate": 90.0,
            "produce_latency": latency(20, 40),
            "receive_ack_latency": latency(30, 60),
        }
        for batch in (1, 10, 100, 1000)
    ],
    "idle": {
        "long_poll_month": 0.31,
        "push_consumer_month": 0.77,
        "push_max_interval_s": 10.0,
        "sqs_long_poll_month": 0.05184,
    },
}
LATENCY = {
    "batches": [
        {"batch": b, "rounds": 5, "produce": latency(11 * b, 13 * b), "end_to_end": latency(17, 19)}
        for b in (1, 10, 100, 1000)
    ]
}
IDLE = {
    "prices": "2026-11-26",
    "consumer_month": 0.0391,
    "connection_minutes_month": 0.0108,
    "wake_up_p50_ms": 123.0,
    "wake_up_max_ms": 456.0,
    "fanout": 50,
    "fanout_last_told_ms": 789.0,
}
SPARK = {
    "messages": 2000,
    "body_bytes": 256,
    "batch": 500,
    "objects": 4,
    "master": "local[2]",
    "readers": {
        "data source (8 objects/task)": {"rows": 2000, "best_s": 2.0, "rows_per_s": 1000.0},
        "native Parquet, local mirror": {"rows": 2000, "best_s": 0.5, "rows_per_s": 4000.0},
    },
    "ratios": {"baseline": 0.93, "native": 0.25},
    "goals": {"baseline": 0.8, "native": 0.5},
}
DELAYS = {
    "messages": 100,
    "spread_s": 20.0,
    "received": 100,
    "early": 0,
    "lateness": {
        "visible": {"p50_ms": 310.0, "p99_ms": 920.0, "max_ms": 990.0},
        "received": {"p50_ms": 1310.0, "p99_ms": 2920.0, "max_ms": 2990.0},
    },
    "requests_per_million": 3.21,
}
DEPLOY_MD = """# Deploy

## What it costs at rest

| function | runs a minute | AWS calls | ms a run | requests a month | Lambda a month |
|---|---:|---:|---:|---:|---:|
| SchedulerFunction | 1 | 5 | 108 (256 MB) | $0.049 | $0.024 |
| JanitorFunction | 1.02 | 1.8 | 78 (1,024 MB) | $0.103 | $0.055 |

## Next
"""


@pytest.fixture
def deploy_md(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.md"
    path.write_text(DEPLOY_MD)
    return path


def test_report_writes_charts_and_tables_from_fixed_inputs(tmp_path: Path, deploy_md: Path) -> None:
    results = {
        "core": with_data(CORE),
        "latency": with_data(LATENCY),
        "idle": with_data(IDLE),
        "spark": with_data(SPARK),
        "delays": with_data(DELAYS),
    }
    out = tmp_path / "benchmarks"
    page = write_report(results, out, quick=True, deploy_md=deploy_md).read_text()

    for chart in ("cost.png", "latency.png", "spark.png", "delays.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", chart
        assert f"]({chart})" in page
    # cost table: batch, default, default w/o GB-s, steady, steady w/o GB-s, SQS, floor
    assert "| 1 | $12.5000 | $6.2500 | $8.2500 | $4.1250 | $1.2000 | $7.0000 |" in page
    assert "| 1,000 | $0.0125 | $0.0063 | $0.0083 | $0.0041 | $0.1200 | $0.0070 |" in page
    # on paper for AWS: w/o duration + (low, high) duration
    assert "| 1,000 | $0.0094-$0.0188 | $0.0062-$0.0124 |" in page
    assert (
        "- batch 100, `default`: goal $0.1250: here met ($0.1250; $0.0625 without Lambda GB-s);"
        " on paper for AWS met at the low end only ($0.0938-$0.1875)"
    ) in page
    assert "| 100 | 5 | 1,100 | 1,300 | 17 | 19 |" in page
    assert "| SchedulerFunction | $0.0490 | $0.0240 |" in page
    assert "about **$0.2310 a month**" in page
    assert "| PushConsumer adaptive polling (cap 10 s) | $0.7700 | core_queue.py |" in page
    assert "$0.0391" in page and "wake-up p50 123 ms" in page
    assert "| native Parquet, local mirror | 2,000 | 0.50 | 4,000 |" in page
    assert "of the S3 baseline 0.93 (goal ≥ 0.8: met); of the native reader 0.25" in page
    assert "(goal ≥ 0.5: **not met**)" in page
    assert "| received | 1,310 | 2,920 | 2,990 |" in page
    assert "timeouts-and-retries-for-latency-sensitive-applications.html" in page
    assert "an estimate on paper, not a measurement" in page
    # every figure says when and where it ran; the loaded machine is said
    assert page.count("Measured 2026-12-02 02:30 UTC (42 s) on 2 cores") == 6
    assert "load average 8.5 at the start and 9.25 at the end" in page
    assert "**The machine was loaded** (load average 8.5 before the steps, up to 9.25" in page
    assert "**Quick run**" in page


def test_the_steps_own_load_does_not_make_the_machine_loaded(
    tmp_path: Path, deploy_md: Path
) -> None:
    # quiet before the first step; the benchmark's own processes load both cores while it runs
    core = {**with_data(CORE), "start": stamp(0.2), "end": stamp(2.1)}
    spark = {**with_data(SPARK), "start": stamp(2.1), "end": stamp(2.3)}
    page = write_report(
        {"core": core, "spark": spark}, tmp_path / "b", quick=False, deploy_md=deploy_md
    ).read_text()
    assert "The machine was loaded" not in page


def test_a_failed_step_is_reported_as_not_measured(tmp_path: Path, deploy_md: Path) -> None:
    failed = {**record({}), "error": "exit 1: Traceback / boom"}
    results = {"core": with_data(CORE), "spark": failed}
    out = tmp_path / "benchmarks"
    page = write_report(results, out, quick=False, deploy_md=deploy_md).read_text()
    assert "Not measured: the step failed (exit 1: Traceback / boom)." in page
    assert "## 2. Produce and end-to-end latency\n\nNot run in this report." in page
    assert not (out / "spark.png").exists()
    assert (out / "cost.png").exists()


def test_quick_steps_run_each_benchmark_with_a_json_option() -> None:
    """Every step's script exists and accepts its quick arguments and ``--json``."""
    assert [s.name for s in STEPS] == ["core", "latency", "idle", "spark", "delays"]
    for step in STEPS:
        command = step.command(True, Path("/tmp/x.json"))
        assert command[:2] == [sys.executable, str(HERE / step.script)]
        assert command[-2:] == ["--json", "/tmp/x.json"]
        shown = subprocess.run(
            [sys.executable, str(HERE / step.script), "--help"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for option in [a for a in step.quick if a.startswith("--")] + ["--json"]:
            assert option in shown, (step.script, option)


def test_run_steps_records_json_machine_and_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner: one progress line per step, each step's JSON, when and how busy."""
    script = tmp_path / "fake.py"
    script.write_text(
        "import json, sys\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "json.dump({'args': sys.argv[1:-2]}, open(path, 'w'))\n"
    )
    monkeypatch.setattr(bench_report, "HERE", tmp_path)
    steps = (Step("fake", "fake.py", ("--full",), ("--small",), "a fake"),)
    results = bench_report.run_steps(steps, True, tmp_path / "data", tmp_path / "logs")
    assert results["fake"]["data"] == {"args": ["--small"]}
    assert results["fake"]["start"]["cores"] >= 1 and "load" in results["fake"]["end"]
    assert "[1/1] fake: fake.py" in capsys.readouterr().out


def test_latency_benchmark_writes_json(tmp_path: Path) -> None:
    """latency.py on a tiny input: the JSON the report reads."""
    out = tmp_path / "latency.json"
    subprocess.run(
        [sys.executable, str(HERE / "latency.py"), "--rounds", "1", "--batches", "1,10"]
        + ["--json", str(out)],
        check=True,
        capture_output=True,
    )
    data = json.loads(out.read_text())
    assert [b["batch"] for b in data["batches"]] == [1, 10]
    assert all(b["end_to_end"]["requests"] == 1 for b in data["batches"])


def test_from_data_rerenders_the_page_without_running(tmp_path: Path) -> None:
    """``--from-data``: the page and charts again from a saved report.json, no benchmark run."""
    data = tmp_path / "data"
    data.mkdir()
    saved = {"quick": False, "results": {"core": with_data(CORE)}}
    (data / "report.json").write_text(json.dumps(saved))
    out = tmp_path / "out"
    assert bench_report.main(["--from-data", str(data), "--out", str(out)]) == 0
    page = (out / "README.md").read_text()
    assert "(cost.png)" in page and (out / "cost.png").exists()
    assert "**Quick run**" not in page


def test_the_spark_section_says_how_its_reads_repeat(tmp_path: Path, deploy_md: Path) -> None:
    interleaved = {**SPARK, "repeat": 4, "rounds": "interleaved"}
    for data, said in (
        (SPARK, "best of each reader's repeats, run back to back"),
        (
            interleaved,
            "best of 4 rounds, each round running every reader once (with each reader's"
            " repeats back to back, native reads faster and the native ratio has mostly been"
            " below 0.5",
        ),
    ):
        out = tmp_path / str(len(data))
        page = write_report({"spark": with_data(data)}, out, quick=True, deploy_md=deploy_md)
        assert said in page.read_text()
